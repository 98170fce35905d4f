/*
 * hostport.h — the one parser of a server address as an operator writes it
 * (--replica-of, replica_of, follow): "host:port", "[v6]:port" or
 * "unix:/path".
 *
 * Contract: hostport_split() accepts exactly
 *   - unix:/PATH  an absolute path (port -1);
 *   - [V6]:PORT   V6 an IPv6 literal (an optional %zone after it);
 *   - HOST:PORT   HOST an IPv4 literal or a name: letters, digits, '-',
 *                 '.', '_' only (an IPv6 literal must be in brackets);
 * with PORT decimal 1..65535 and nothing else (no space, no sign). It
 * returns 0 and fills host (the host, the IPv6 literal without brackets,
 * or the path) and *port; -1 on anything else, also when host would not
 * fit in hostlen bytes. It resolves nothing (a name is looked up at
 * connect time).
 */
#ifndef TUBED_HOSTPORT_H
#define TUBED_HOSTPORT_H

#include <stddef.h>

int hostport_split(const char *addr, char *host, size_t hostlen, int *port);

#endif
