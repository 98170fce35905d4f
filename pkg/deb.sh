#!/usr/bin/env bash
# pkg/deb.sh — build the Debian binary package build/tubed_VERSION_ARCH.deb
# (`make deb` runs this). Needs dpkg-dev (dpkg-deb, dpkg-buildflags,
# dpkg-shlibdeps) and a C compiler; lintian, if installed, is run on the
# result (LINTIAN=0 skips it) and any error fails the build.
#
# How: a hardened build (dpkg-buildflags) in a private build tree, then
# `make install DESTDIR=stage PREFIX=/usr`, then the files Debian wants on
# top (units, /etc/default/tubed, docs, copyright, changelog, maintainer
# scripts from pkg/debian/), then dpkg-deb. Nothing outside build/ is
# touched, and build/tubed is left alone.
set -euo pipefail
umask 022
cd "$(dirname "$0")/.."

die() { echo "pkg/deb.sh: $*" >&2; exit 1; }

for tool in dpkg-deb dpkg-buildflags dpkg-shlibdeps dpkg-architecture; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install dpkg-dev)"
done

VERSION=$(sed -n 's/^VERSION[[:space:]]*:=[[:space:]]*//p' Makefile)
[ -n "$VERSION" ] || die "no VERSION in Makefile"
CHANGELOG_VERSION=$(sed -n '1s/^tubed (\([^)]*\)).*/\1/p' pkg/debian/changelog)
[ "$CHANGELOG_VERSION" = "$VERSION" ] ||
    die "pkg/debian/changelog starts with version '$CHANGELOG_VERSION', the Makefile says '$VERSION': add a changelog entry"
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
DEB=build/tubed_${VERSION}_${ARCH}.deb
# Reproducible timestamps: the date of the newest changelog entry.
SOURCE_DATE_EPOCH=$(date -d "$(sed -n 's/^ -- .*>  //p' pkg/debian/changelog | head -n1)" +%s)
export SOURCE_DATE_EPOCH

mkdir -p build
work=$(mktemp -d "$PWD/build/deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
objs=$work/build

# -- build and install ------------------------------------------------------
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
CFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)"
LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
jobs=$(nproc 2>/dev/null || echo 2)
# SAN= and the explicit BUILD=: a `make deb` run from inside another make
# (MAKEFLAGS may carry SAN=1 BUILD=build/asan) still builds a plain package.
make -s -j"$jobs" BUILD="$objs" SAN= OPT= CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" all
make -s BUILD="$objs" SAN= OPT= CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" \
    install DESTDIR="$stage" PREFIX=/usr SYSCONFDIR=/etc

for b in tubed tubed-bench tubed-cli; do
    [ -x "$stage/usr/bin/$b" ] || die "make install did not install /usr/bin/$b"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note \
        "$stage/usr/bin/$b"
done
for m in tubed tubed-bench tubed-cli; do
    [ -f "$stage/usr/share/man/man1/$m.1" ] || die "make install did not install man/$m.1"
done
gzip -9nf "$stage"/usr/share/man/man1/*.1

# -- Debian's files ---------------------------------------------------------
# Units where bookworm's debhelper puts them (usrmerge makes /lib and
# /usr/lib one directory on the installed system).
unitdir=$stage/lib/systemd/system
install -d "$unitdir" "$stage/etc/default" "$stage/usr/share/doc/tubed"
install -m 0644 pkg/systemd/tubed.service pkg/systemd/tubed.socket "$unitdir/"
for u in pkg/systemd/tubed-*.socket; do
    [ -e "$u" ] && install -m 0644 "$u" "$unitdir/"
done
install -m 0644 pkg/default/tubed "$stage/etc/default/tubed"
[ -f "$stage/etc/tubed/tubed.conf" ] || die "make install did not install /etc/tubed/tubed.conf"
# Failover (doc/failover.md): the Pacemaker resource agent (provider
# "tubed"), keepalived's notify and check scripts, their example files.
install -d "$stage/usr/lib/ocf/resource.d/tubed" "$stage/usr/lib/tubed/keepalived" \
    "$stage/usr/share/doc/tubed/examples/keepalived" "$stage/usr/share/man/man7"
install -m 0755 pkg/ocf/tubed "$stage/usr/lib/ocf/resource.d/tubed/tubed"
install -m 0755 pkg/keepalived/tubed-keepalived-notify pkg/keepalived/tubed-keepalived-check \
    "$stage/usr/lib/tubed/keepalived/"
install -m 0644 pkg/keepalived/keepalived.conf pkg/keepalived/tubed-keepalived.env \
    "$stage/usr/share/doc/tubed/examples/keepalived/"
for m in man/*.7; do
    [ -e "$m" ] && install -m 0644 "$m" "$stage/usr/share/man/man7/"
done
gzip -9nf "$stage"/usr/share/man/man7/*.7
doc=$stage/usr/share/doc/tubed
install -m 0644 pkg/debian/copyright "$doc/copyright"
gzip -9n <pkg/debian/changelog >"$doc/changelog.gz"
install -m 0644 README.md "$doc/README.md"
for f in doc/*.md; do
    install -m 0644 "$f" "$doc/"
done

# -- control area -------------------------------------------------------------
install -d "$stage/DEBIAN"
install -m 0644 pkg/debian/conffiles "$stage/DEBIAN/conffiles"
for s in postinst prerm postrm; do
    install -m 0755 "pkg/debian/$s" "$stage/DEBIAN/$s"
done

# Shared-library dependencies, computed as dh_shlibdeps would (it wants a
# debian/control in the current directory).
mkdir -p "$work/shlibs/debian"
printf 'Source: tubed\n\nPackage: tubed\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" &&
          dpkg-shlibdeps -O -e"$stage/usr/bin/tubed" -e"$stage/usr/bin/tubed-bench" \
              -e"$stage/usr/bin/tubed-cli" 2>/dev/null |
          sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies"

size=$(du -k -s --apparent-size --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends/" pkg/debian/control >"$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
     LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"

find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

rm -f "$DEB"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$DEB" >/dev/null
echo "pkg/deb.sh: built $DEB"

# -- lint -----------------------------------------------------------------------
if [ "${LINTIAN:-1}" != 0 ]; then
    if command -v lintian >/dev/null; then
        # Errors fail the build; warnings are shown.
        lintian --fail-on error --tag-display-limit 0 "$DEB" ||
            die "lintian found errors in $DEB"
    else
        echo "pkg/deb.sh: lintian not installed; not checked (apt-get install lintian)" >&2
    fi
fi
