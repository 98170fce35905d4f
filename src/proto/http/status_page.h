/*
 * status_page.h — the status page (status.html), carried in the binary.
 *
 * Contract: the build turns src/proto/http/status.html into
 * $(BUILD)/gen/status_page.c with embed.sh; it defines these two: the
 * page's bytes (followed by a NUL that is not part of it) and their count.
 * GET / answers them as they are.
 */
#ifndef TUBED_STATUS_PAGE_H
#define TUBED_STATUS_PAGE_H

#include <stddef.h>

extern const char status_page_html[];
extern const size_t status_page_len;

#endif
