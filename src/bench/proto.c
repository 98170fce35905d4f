/* proto.c - beanstalk client encoding and reply framing; see proto.h. */
#include "proto.h"

#include <stdio.h>
#include <string.h>

#include "../lib/numparse.h"

/* Numbers both ways with the server's own strict routines (numparse.c,
 * linked in): the same rules on both sides of the wire, and no snprintf
 * in the client's hot path. */
static bool dec_to_u64(const char *p, size_t n, uint64_t *v)
{
	return parse_u64(p, n, v) == 0;
}

static bool starts_with(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);
	return n >= k && memcmp(p, prefix, k) == 0;
}

/* Body size announced by a RESERVED/FOUND/OK line: its last number. */
static bool body_size(const char *line, size_t n, uint64_t *size)
{
	if (!starts_with(line, n, "RESERVED ") && !starts_with(line, n, "FOUND ") &&
	    !starts_with(line, n, "OK "))
		return false;
	const char *sp = memrchr(line, ' ', n);
	return dec_to_u64(sp + 1, n - (size_t)(sp + 1 - line), size);
}

ssize_t proto_frame_line(const char *p, size_t n, Reply *r)
{
	size_t scan = n < PROTO_MAX_LINE ? n : PROTO_MAX_LINE;
	const char *nl = memchr(p, '\n', scan);
	if (!nl)
		return n >= PROTO_MAX_LINE ? -1 : 0;
	if (nl == p || nl[-1] != '\r')
		return -1; /* a bare \n: the server never sends one */
	r->line = p;
	r->line_len = (size_t)(nl - 1 - p);
	r->body = NULL;
	r->body_len = 0;
	return (ssize_t)(r->line_len + 2);
}

ssize_t proto_frame(const char *p, size_t n, Reply *r, size_t *need)
{
	*need = 0;
	ssize_t got = proto_frame_line(p, n, r);
	if (got <= 0)
		return got;
	size_t head = (size_t)got;
	uint64_t size;
	if (!body_size(r->line, r->line_len, &size))
		return (ssize_t)head;
	if (size > PROTO_MAX_BODY)
		return -1;
	size_t total = head + (size_t)size + 2;
	if (n < total) {
		*need = total;
		return 0;
	}
	if (p[total - 2] != '\r' || p[total - 1] != '\n')
		return -1; /* body longer or shorter than announced */
	r->body = p + head;
	r->body_len = (size_t)size;
	return (ssize_t)total;
}

void proto_put(Buf *out, uint32_t pri, uint32_t delay, uint32_t ttr,
	       const char *body, size_t size)
{
	char line[96];
	int k = snprintf(line, sizeof line, "put %u %u %u %zu\r\n", pri, delay, ttr, size);
	buf_append(out, line, (size_t)k);
	buf_append(out, body, size);
	buf_append(out, "\r\n", 2);
}

void proto_line(Buf *out, const char *cmd)
{
	buf_append(out, cmd, strlen(cmd));
	buf_append(out, "\r\n", 2);
}

void proto_line_name(Buf *out, const char *cmd, const char *name)
{
	buf_append(out, cmd, strlen(cmd));
	buf_append(out, " ", 1);
	buf_append(out, name, strlen(name));
	buf_append(out, "\r\n", 2);
}

void proto_line_u64(Buf *out, const char *cmd, uint64_t v)
{
	size_t k = strlen(cmd);
	char *p = buf_space(out, k + 24);
	memcpy(p, cmd, k);
	p[k++] = ' ';
	k += fmt_u64(p + k, v);
	p[k++] = '\r';
	p[k++] = '\n';
	out->len += k;
}

bool reply_is(const Reply *r, const char *word)
{
	return r->body == NULL && r->line_len == strlen(word) &&
	       memcmp(r->line, word, r->line_len) == 0;
}

bool reply_word_u64(const Reply *r, const char *word, uint64_t *n)
{
	size_t k = strlen(word);
	return r->body == NULL && r->line_len > k + 1 &&
	       memcmp(r->line, word, k) == 0 && r->line[k] == ' ' &&
	       dec_to_u64(r->line + k + 1, r->line_len - k - 1, n);
}

bool reply_word_name(const Reply *r, const char *word, const char *name)
{
	size_t k = strlen(word), m = strlen(name);
	return r->body == NULL && r->line_len == k + 1 + m &&
	       memcmp(r->line, word, k) == 0 && r->line[k] == ' ' &&
	       memcmp(r->line + k + 1, name, m) == 0;
}

bool reply_reserved(const Reply *r, uint64_t *id)
{
	if (r->body == NULL || !starts_with(r->line, r->line_len, "RESERVED "))
		return false;
	const char *p = r->line + 9, *end = r->line + r->line_len;
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	return sp && dec_to_u64(p, (size_t)(sp - p), id);
}
