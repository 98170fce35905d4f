/* bench.c - small helpers shared by the modules; see bench.h. */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_fail(Bench *b, const char *fmt, ...)
{
	if (b->failure[0] == '\0') {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(b->failure, sizeof b->failure, fmt, ap);
		va_end(ap);
	}
	return -1;
}

const char *bench_quote(const char *p, size_t n, char *out, size_t outlen)
{
	size_t k = 0;
	out[k++] = '"';
	for (size_t i = 0; i < n && k + 8 < outlen; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\r')
			k += (size_t)snprintf(out + k, outlen - k, "\\r");
		else if (ch == '\n')
			k += (size_t)snprintf(out + k, outlen - k, "\\n");
		else if (ch < 32 || ch >= 127 || ch == '"' || ch == '\\')
			k += (size_t)snprintf(out + k, outlen - k, "\\x%02x", ch);
		else
			out[k++] = (char)ch;
		if (i + 1 < n && k + 8 >= outlen) {
			k += (size_t)snprintf(out + k, outlen - k, "...");
			break;
		}
	}
	out[k++] = '"';
	out[k] = '\0';
	return out;
}
