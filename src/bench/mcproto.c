/* mcproto.c - memcache client encoding and reply framing; see mcproto.h. */
#include "mcproto.h"

#include <stdint.h>
#include <string.h>

#include "../lib/numparse.h"

#define VALUE_WORD "VALUE "
#define END_LINE "END\r\n"

static bool is_value_line(const char *line, size_t n)
{
	return n > strlen(VALUE_WORD) && memcmp(line, VALUE_WORD, strlen(VALUE_WORD)) == 0;
}

/* The data size of a VALUE line: its last number (memcached adds a cas
 * value only for gets, which tubed-bench never sends). */
static bool value_size(const char *line, size_t n, uint64_t *size)
{
	const char *sp = memrchr(line, ' ', n);
	return parse_u64(sp + 1, n - (size_t)(sp + 1 - line), size) == 0;
}

ssize_t mcproto_frame(const char *p, size_t n, Reply *r, size_t *need)
{
	*need = 0;
	ssize_t got = proto_frame_line(p, n, r);
	if (got <= 0)
		return got;
	size_t head = (size_t)got;
	uint64_t size;
	if (!is_value_line(r->line, r->line_len))
		return (ssize_t)head;
	if (!value_size(r->line, r->line_len, &size) || size > PROTO_MAX_BODY)
		return -1;
	size_t total = head + (size_t)size + 2 + strlen(END_LINE);
	if (n < total) {
		*need = total;
		return 0;
	}
	const char *tail = p + head + size;
	if (memcmp(tail, "\r\n" END_LINE, 2 + strlen(END_LINE)) != 0)
		return -1; /* data of another size, or more than one VALUE */
	r->body = p + head;
	r->body_len = (size_t)size;
	return (ssize_t)total;
}

void mcproto_set_tail(Buf *out, const char *body, size_t size)
{
	char *p = buf_space(out, 32);
	size_t k = 0;
	memcpy(p, " 0 0 ", 5);
	k = 5 + fmt_u64(p + 5, size);
	p[k++] = '\r';
	p[k++] = '\n';
	out->len += k;
	buf_append(out, body, size);
	buf_append(out, "\r\n", 2);
}

void mcproto_set(Buf *out, const char *key, const Buf *tail)
{
	buf_append(out, "set ", 4);
	buf_append(out, key, strlen(key));
	buf_append(out, tail->data, tail->len);
}

void mcproto_get(Buf *out, const char *key, const char *suffix)
{
	buf_append(out, "get ", 4);
	buf_append(out, key, strlen(key));
	buf_append(out, suffix, strlen(suffix));
	buf_append(out, "\r\n", 2);
}

bool mcreply_value(const Reply *r, const char *key, const char *suffix)
{
	size_t kw = strlen(VALUE_WORD), k = strlen(key), s = strlen(suffix);
	const char *p = r->line + kw, *end = r->line + r->line_len;
	uint64_t n;
	if (r->body == NULL || r->line_len < kw + k + s + 4)
		return false;
	if (memcmp(p, key, k) != 0 || memcmp(p + k, suffix, s) != 0)
		return false;
	p += k + s;
	if (memcmp(p, " 0 ", 3) != 0)
		return false;
	p += 3;
	return parse_u64(p, (size_t)(end - p), &n) == 0 && n == r->body_len;
}
