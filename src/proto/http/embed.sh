#!/bin/sh
# embed.sh IN OUT — turn the status page (status.html) into C source that
# defines
#     const char status_page_html[];   the bytes of IN, then a NUL
#     const size_t status_page_len;    the number of bytes of IN
# so the server carries its page and needs no file at run time. Plain POSIX
# sh and od (coreutils), no xxd. OUT is written aside and renamed, so an
# interrupted build never leaves half a file behind.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 IN.html OUT.c" >&2
    exit 2
fi
in=$1
out=$2
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
{
    printf '/* Generated from %s by embed.sh: do not edit. */\n' "$(basename "$in")"
    printf '#include <stddef.h>\n\n'
    printf 'extern const char status_page_html[];\n'
    printf 'extern const size_t status_page_len;\n\n'
    printf 'const char status_page_html[] = {\n'
    # character constants ('\xe2'), not integers (0xe2): they have the
    # value a char holds whether char is signed or not, so no conversion
    # warning fires under any flags
    od -An -v -tx1 "$in" | sed -e 's/^ *//' -e 's/ *$//' -e '/^$/d' \
        -e 's/ \{1,\}/Q, Q\\x/g' -e 's/^/    Q\\x/' -e 's/$/Q,/' | tr Q "'"
    printf '    %s\n};\n' "'\\0'"
    printf 'const size_t status_page_len = sizeof status_page_html - 1;\n'
} >"$tmp"
mv -f "$tmp" "$out"
trap - EXIT
