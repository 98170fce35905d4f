#include "conflisten.h"

#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ascii.h"
#include "numparse.h"

static const char *const role_names[] = {"read", "producer", "worker", "admin"};
static const char *const proto_names[] = {"beanstalk", "memcache", "http"};
static const char *const key_names[LK_COUNT] = {
    "address", "protocol", "role", "tubes", "users", "groups", "socket_mode",
};

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *n)
{
    while (*n && blank(**s))
        (*s)++, (*n)--;
    while (*n && blank((*s)[*n - 1]))
        (*n)--;
}

/* The next comma-separated item of [*p, end), trimmed; 0 past the last.
 * *p is NULL once the last item is taken. */
static int next_item(const char **p, const char *end, const char **item, size_t *n)
{
    const char *comma;

    if (!*p)
        return 0;
    comma = memchr(*p, ',', (size_t)(end - *p));
    *item = *p;
    *n = comma ? (size_t)(comma - *p) : (size_t)(end - *p);
    *p = comma ? comma + 1 : NULL;
    trim(item, n);
    return 1;
}

static int word_is(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && !memcmp(s, w, n);
}

int conf_listen_start(ConfListen *l, const char *name, size_t len, unsigned long line,
                      char *why, size_t whylen)
{
    memset(l, 0, sizeof *l);
    if (!len || len > LISTEN_NAME_MAX) {
        snprintf(why, whylen, "listener name must be 1 to %d characters", LISTEN_NAME_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_')) {
            snprintf(why, whylen, "illegal listener name (want letters, digits, '-' and '_')");
            return -1;
        }
    }
    memcpy(l->name, name, len);
    l->line = line;
    l->roles = ROLE_ADMIN;
    l->socket_mode = 0660;
    return 0;
}

/* "HOST:PORT", "[V6]:PORT" or "unix:/path". */
static int parse_address(ConfListen *l, const char *v, size_t n, char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    const char *colon;
    uint64_t port;
    size_t hn;

    if (n > LISTEN_ADDR_MAX) {
        snprintf(why, whylen, "address too long (at most %d bytes)", LISTEN_ADDR_MAX);
        return -1;
    }
    /* Shown in logs, stats-listeners (a quoted YAML string) and metrics. */
    for (size_t i = 0; i < n; i++)
        if (v[i] <= 0x20 || v[i] >= 0x7f || v[i] == '"' || v[i] == '\\') {
            snprintf(why, whylen, "bad address '%s' (no blanks, quotes or backslashes)",
                     ascii_text_cut(qb, sizeof qb, v, n));
            return -1;
        }
    memcpy(l->address, v, n);
    l->address[n] = '\0';
    if (n > 5 && !memcmp(v, "unix:", 5)) {
        if (v[5] != '/' || n - 5 >= 108) {
            snprintf(why, whylen, "bad address '%s' (want unix:/absolute/path, under 108 bytes)",
                     l->address);
            return -1;
        }
        memcpy(l->host, v, n);
        l->host[n] = '\0';
        l->is_unix = true;
        l->port = 0;
        return 0;
    }
    colon = NULL;
    for (size_t i = n; i > 0; i--)
        if (v[i - 1] == ':') {
            colon = v + i - 1;
            break;
        }
    if (!colon || parse_u64(colon + 1, (size_t)(v + n - colon - 1), &port) < 0 ||
        port == 0 || port > 65535) {
        snprintf(why, whylen, "bad address '%s' (want HOST:PORT, [V6]:PORT or unix:/path)",
                 l->address);
        return -1;
    }
    hn = (size_t)(colon - v);
    if (hn && v[0] == '[') {
        if (hn < 3 || v[hn - 1] != ']') {
            snprintf(why, whylen, "bad address '%s' (an IPv6 host goes in [])", l->address);
            return -1;
        }
        v++;
        hn -= 2;
    } else if (memchr(v, ':', hn)) {
        snprintf(why, whylen, "bad address '%s' (an IPv6 host goes in [])", l->address);
        return -1;
    }
    for (size_t i = 0; i < hn; i++)
        if (blank(v[i])) {
            snprintf(why, whylen, "bad address '%s' (blank in the host)", l->address);
            return -1;
        }
    memcpy(l->host, v, hn);
    l->host[hn] = '\0';
    l->port = (int)port;
    l->is_unix = false;
    return 0;
}

static int parse_roles(ConfListen *l, const char *v, size_t n, char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    const char *p = v, *end = v + n, *it = NULL;
    size_t in;
    unsigned roles = 0;

    while (next_item(&p, end, &it, &in)) {
        size_t r;
        for (r = 0; r < 4 && !word_is(it, in, role_names[r]); r++)
            ;
        if (r == 4) {
            snprintf(why, whylen, "unknown role '%s' (want admin, worker, producer or read, "
                     "comma-separated)", ascii_text_cut(qb, sizeof qb, it, in));
            return -1;
        }
        roles |= 1u << r;
    }
    l->roles = (uint8_t)roles;
    return 0;
}

static int parse_tubes(ConfListen *l, const char *v, size_t n, char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    const char *p = v, *end = v + n, *it = NULL;
    size_t in, cnt = 1;
    TubePattern *tp;

    for (size_t i = 0; i < n; i++)
        cnt += v[i] == ',';
    if (cnt > LISTEN_MAX_PATTERNS) {
        snprintf(why, whylen, "too many tube patterns (at most %d)", LISTEN_MAX_PATTERNS);
        return -1;
    }
    if (!(tp = tb_calloc(cnt, sizeof *tp)))
        return -2;
    l->tubes = tp;
    l->ntubes = 0;
    while (next_item(&p, end, &it, &in)) {
        bool pre = in > 0 && it[in - 1] == '*';
        size_t nl = in - pre;
        if (!(pre && nl == 0) && !tube_name_valid(it, nl)) {
            snprintf(why, whylen, "bad tube pattern '%s' (want a tube name, or a name "
                     "prefix followed by '*')", ascii_text_cut(qb, sizeof qb, it, in));
            return -1;
        }
        tp[l->ntubes].len = (uint8_t)nl;
        tp[l->ntubes].is_prefix = pre;
        memcpy(tp[l->ntubes].name, it, nl);
        l->ntubes++;
    }
    return 0;
}

/* A user or group name as POSIX allows it portably. */
static int id_name_ok(const char *s, size_t n)
{
    if (!n || n > 32 || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

static int parse_ids(ListenId *ids, size_t *nids, const char *what, const char *v, size_t n,
                     char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    const char *p = v, *end = v + n, *it = NULL;
    size_t in;

    *nids = 0;
    while (next_item(&p, end, &it, &in)) {
        uint64_t num;
        if (*nids == LISTEN_MAX_IDS) {
            snprintf(why, whylen, "too many %s (at most %d)", what, LISTEN_MAX_IDS);
            return -1;
        }
        memset(&ids[*nids], 0, sizeof ids[*nids]);
        if (parse_u64(it, in, &num) == 0 && num < UINT32_MAX) {
            ids[*nids].id = (uint32_t)num;
        } else if (id_name_ok(it, in)) {
            memcpy(ids[*nids].name, it, in);
        } else {
            snprintf(why, whylen, "bad entry '%s' in %s (want a name or a number)",
                     ascii_text_cut(qb, sizeof qb, it, in), what);
            return -1;
        }
        (*nids)++;
    }
    return 0;
}

static int parse_mode(ConfListen *l, const char *v, size_t n, char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    uint32_t m = 0;

    if (!n || n > 4)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '7')
            goto bad;
        m = m * 8 + (uint32_t)(v[i] - '0');
    }
    l->socket_mode = m;
    return 0;
bad:
    snprintf(why, whylen, "bad socket_mode '%s' (want octal permissions such as 0660)",
             ascii_text_cut(qb, sizeof qb, v, n));
    return -1;
}

int conf_listen_key(ConfListen *l, const char *key, size_t kn, const char *v, size_t vn,
                    unsigned long line, char *why, size_t whylen)
{
    char qb[CONF_QUOTED_SIZE];
    int k, r;

    for (k = 0; k < LK_COUNT && !word_is(key, kn, key_names[k]); k++)
        ;
    if (k == LK_COUNT) {
        snprintf(why, whylen, "unknown key '%s' in [listen %s] (want address, protocol, "
                 "role, tubes, users, groups or socket_mode)",
                 ascii_text_cut(qb, sizeof qb, key, kn), l->name);
        return -1;
    }
    if (l->set & (1u << k)) {
        snprintf(why, whylen, "duplicate key %s (first set at line %lu)", key_names[k],
                 l->key_line[k]);
        return -1;
    }
    if (!vn) {
        snprintf(why, whylen, "missing value for %s", key_names[k]);
        return -1;
    }
    switch (k) {
    case LK_ADDRESS:
        r = parse_address(l, v, vn, why, whylen);
        break;
    case LK_PROTOCOL:
        for (r = 0; r < 3 && !word_is(v, vn, proto_names[r]); r++)
            ;
        if (r == 3) {
            snprintf(why, whylen, "unknown protocol '%s' (want beanstalk, memcache or http)",
                     ascii_text_cut(qb, sizeof qb, v, vn));
            return -1;
        }
        l->protocol = (uint8_t)r;
        r = 0;
        break;
    case LK_ROLE:
        r = parse_roles(l, v, vn, why, whylen);
        break;
    case LK_TUBES:
        r = parse_tubes(l, v, vn, why, whylen);
        break;
    case LK_USERS:
        r = parse_ids(l->users, &l->nusers, "users", v, vn, why, whylen);
        break;
    case LK_GROUPS:
        r = parse_ids(l->groups, &l->ngroups, "groups", v, vn, why, whylen);
        break;
    default:
        r = parse_mode(l, v, vn, why, whylen);
        break;
    }
    if (r < 0)
        return r;
    l->set |= 1u << k;
    l->key_line[k] = line;
    return 0;
}

static bool any_host(const char *h)
{
    return !*h || !strcmp(h, "0.0.0.0") || !strcmp(h, "::") || !strcmp(h, "*");
}

/* The path of "unix:PATH" with "//", "/./" and "NAME/.." taken out, so
 * that two spellings of one file compare equal (symbolic links are not
 * followed; listen_unix() refuses to replace a live socket in any case). */
static void norm_path(const char *unix_host, char out[LISTEN_ADDR_MAX + 1])
{
    const char *p = unix_host + 5;
    size_t n = 0;

    while (*p) {
        const char *c = p;
        size_t len;
        while (*c == '/')
            c++;
        for (len = 0; c[len] && c[len] != '/'; len++)
            ;
        p = c + len;
        if (len == 0 || (len == 1 && c[0] == '.'))
            continue;
        if (len == 2 && c[0] == '.' && c[1] == '.') {
            while (n > 0 && out[--n] != '/')
                ;
            continue;
        }
        out[n++] = '/';
        memcpy(out + n, c, len);
        n += len;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
}

/* The address a listener on host would bind: a numeric host as written,
 * a name as the first address the lookup gives (what net_listen() tries
 * first). 0, or -1 when the name does not resolve (the bind says why). */
static int host_addr(const char *host, struct sockaddr_storage *out)
{
    struct addrinfo hints = {0}, *res;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen < sizeof *out ? res->ai_addrlen : sizeof *out);
    freeaddrinfo(res);
    return 0;
}

/* Two TCP hosts that are one address: spelt alike, a wildcard, or, with
 * lookup, the same address looked up (a name, or another spelling of a
 * number), so that "localhost" and "127.0.0.1" on one port clash before
 * the bind, which --check-config does not try. The parse checks without
 * lookup (it is pure: the fuzzers run it); loading the file looks up. */
static bool same_host(const char *a, const char *b, bool lookup)
{
    struct sockaddr_storage x, y;

    if (!strcmp(a, b) || any_host(a) || any_host(b))
        return true;
    if (!lookup || host_addr(a, &x) < 0 || host_addr(b, &y) < 0 || x.ss_family != y.ss_family)
        return false;
    if (x.ss_family == AF_INET)
        return !memcmp(&((struct sockaddr_in *)&x)->sin_addr,
                       &((struct sockaddr_in *)&y)->sin_addr, sizeof(struct in_addr));
    if (x.ss_family == AF_INET6)
        return !memcmp(&((struct sockaddr_in6 *)&x)->sin6_addr,
                       &((struct sockaddr_in6 *)&y)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

/* Two listeners would want the same socket. */
static bool same_address(const ConfListen *a, const ConfListen *b, bool lookup)
{
    if (a->is_unix || b->is_unix) {
        char pa[LISTEN_ADDR_MAX + 1], pb[LISTEN_ADDR_MAX + 1];
        if (!a->is_unix || !b->is_unix)
            return false;
        norm_path(a->host, pa);
        norm_path(b->host, pb);
        return !strcmp(pa, pb);
    }
    if (a->port != b->port)
        return false;
    return same_host(a->host, b->host, lookup);
}

static unsigned long check_one(const ConfListen *ls, size_t i, char *why, size_t whylen)
{
    const ConfListen *l = &ls[i];

    if (!(l->set & (1u << LK_ADDRESS))) {
        snprintf(why, whylen, "[listen %s] has no address", l->name);
        return l->line;
    }
    if (!l->is_unix && (l->set & ((1u << LK_USERS) | (1u << LK_GROUPS) | (1u << LK_SOCKET_MODE)))) {
        int k = l->set & (1u << LK_USERS) ? LK_USERS
              : l->set & (1u << LK_GROUPS) ? LK_GROUPS : LK_SOCKET_MODE;
        snprintf(why, whylen, "%s needs a Unix socket (address unix:/path), not %s",
                 key_names[k], l->address);
        return l->key_line[k];
    }
    if (l->set & (1u << LK_ROLE) && !l->roles) {
        snprintf(why, whylen, "empty role");
        return l->key_line[LK_ROLE];
    }
    for (size_t j = 0; j < i; j++) {
        if (!strcmp(ls[j].name, l->name)) {
            snprintf(why, whylen, "duplicate section [listen %s] (first at line %lu)", l->name,
                     ls[j].line);
            return l->line;
        }
        if (same_address(&ls[j], l, false)) {
            snprintf(why, whylen, "[listen %s] and [listen %s] (line %lu) both listen on %s",
                     l->name, ls[j].name, ls[j].line, l->address);
            return l->key_line[LK_ADDRESS];
        }
    }
    return 0;
}

unsigned long conf_listen_finish(const ConfListen *ls, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; i++) {
        unsigned long line = check_one(ls, i, why, whylen);
        if (line)
            return line;
    }
    return 0;
}

unsigned long conf_listen_clash(const ConfListen *ls, size_t n, const char *host, int port,
                                const char *who, char *why, size_t whylen)
{
    ConfListen m;

    memset(&m, 0, sizeof m);
    if (host && !strncmp(host, "unix:", 5)) {
        m.is_unix = true;
        snprintf(m.host, sizeof m.host, "%s", host);
    } else {
        snprintf(m.host, sizeof m.host, "%s", host ? host : "");
        m.port = port;
    }
    for (size_t i = 0; i < n; i++)
        if (same_address(&ls[i], &m, true)) {
            snprintf(why, whylen, "[listen %s] listens on %s, as %s does", ls[i].name,
                     ls[i].address, who);
            return ls[i].key_line[LK_ADDRESS];
        }
    return 0;
}

unsigned long conf_listen_resolve(ConfListen *ls, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; i++) {
        ConfListen *l = &ls[i];
        for (size_t u = 0; u < l->nusers; u++) {
            struct passwd *pw;
            if (!l->users[u].name[0])
                continue;
            if (!(pw = getpwnam(l->users[u].name))) {
                snprintf(why, whylen, "unknown user '%s' in users", l->users[u].name);
                return l->key_line[LK_USERS];
            }
            l->users[u].id = (uint32_t)pw->pw_uid;
        }
        for (size_t g = 0; g < l->ngroups; g++) {
            struct group *gr;
            if (!l->groups[g].name[0])
                continue;
            if (!(gr = getgrnam(l->groups[g].name))) {
                snprintf(why, whylen, "unknown group '%s' in groups", l->groups[g].name);
                return l->key_line[LK_GROUPS];
            }
            l->groups[g].id = (uint32_t)gr->gr_gid;
        }
    }
    /* The parse compared the addresses as written; a name is one address
     * only once looked up. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (same_address(&ls[j], &ls[i], true)) {
                snprintf(why, whylen, "[listen %s] and [listen %s] (line %lu) both listen on "
                         "%s (%s)", ls[i].name, ls[j].name, ls[j].line, ls[i].address,
                         ls[j].address);
                return ls[i].key_line[LK_ADDRESS];
            }
    return 0;
}

void conf_listen_free(ConfListen *ls, size_t n)
{
    for (size_t i = 0; ls && i < n; i++)
        tb_free(ls[i].tubes);
    tb_free(ls);
}

bool conf_listen_tube_ok(const ConfListen *l, const char *name, size_t len)
{
    if (!l || !(l->set & (1u << LK_TUBES)))
        return true;
    for (size_t i = 0; i < l->ntubes; i++) {
        const TubePattern *p = &l->tubes[i];
        if (p->is_prefix ? len >= p->len && !memcmp(name, p->name, p->len)
                         : len == p->len && !memcmp(name, p->name, len))
            return true;
    }
    return false;
}

bool conf_listen_restricted(const ConfListen *l)
{
    if (!l || !(l->set & (1u << LK_TUBES)))
        return false;
    for (size_t i = 0; i < l->ntubes; i++)
        if (l->tubes[i].is_prefix && l->tubes[i].len == 0)
            return false;
    return true;
}

bool conf_listen_peer_ok(const ConfListen *l, uint32_t uid, uint32_t gid)
{
    if (!l || (!l->nusers && !l->ngroups))
        return true;
    for (size_t i = 0; i < l->nusers; i++)
        if (l->users[i].id == uid)
            return true;
    for (size_t i = 0; i < l->ngroups; i++)
        if (l->groups[i].id == gid)
            return true;
    return false;
}

unsigned role_rows_find(const RoleRow *rows, size_t n, const char *word)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].word, word))
            return rows[i].roles;
    return 0;
}

size_t role_rows_fill(const RoleRow *rows, size_t n, uint8_t *allow, int first, int count,
                      const char *(*name)(int t))
{
    size_t missing = 0;

    for (int t = first; t < count; t++) {
        unsigned r = role_rows_find(rows, n, name(t));
        if (!r) {
            missing++;
            r = ROLE_ADMIN;
        }
        allow[t] = (uint8_t)r;
    }
    return missing;
}

const char *role_rows_at(const RoleRow *rows, size_t n, size_t i, unsigned *roles)
{
    if (i >= n)
        return NULL;
    *roles = rows[i].roles;
    return rows[i].word;
}

const char *conf_role_text(unsigned roles, char *buf, size_t cap)
{
    size_t used = 0;

    if (cap)
        buf[0] = '\0';
    /* Widest first, as an operator would write it. */
    for (int r = 3; r >= 0; r--) {
        if (!(roles & (1u << r)) || used >= cap)
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s", used ? "," : "", role_names[r]);
        if (w > 0)
            used += (size_t)w;
    }
    return buf;
}

const char *conf_proto_name(int protocol)
{
    return protocol >= 0 && protocol < 3 ? proto_names[protocol] : "?";
}

const char *conf_tubes_text(const ConfListen *l, char *buf, size_t cap)
{
    size_t used = 0;

    if (!cap)
        return buf;
    buf[0] = '\0';
    if (!l || !(l->set & (1u << LK_TUBES))) {
        snprintf(buf, cap, "*");
        return buf;
    }
    for (size_t i = 0; i < l->ntubes && used < cap; i++) {
        const TubePattern *p = &l->tubes[i];
        int w = snprintf(buf + used, cap - used, "%s%.*s%s", i ? "," : "", (int)p->len,
                         p->name, p->is_prefix ? "*" : "");
        if (w > 0)
            used += (size_t)w;
    }
    return buf;
}
