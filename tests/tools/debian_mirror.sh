#!/bin/sh
# Prints the Debian mirror the host's own APT sources use for the host's release (the
# first one that serves its codename), without a trailing slash; fails when there is none.
# The kernel lab's private APT and the image tier's debootstrap reuse it, so the tests
# reach exactly the mirror the machine already reaches. Understands the deb822 *.sources
# format and one-line sources.list entries.
set -eu
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
{
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas are separated by blank lines; print the URI of a stanza with the codename.
    awk -v cn="$codename" '
        /^[[:space:]]*$/ { if (u != "" && s ~ ("(^| )" cn "( |$)")) { print u; exit } u = ""; s = ""; next }
        tolower($1) == "uris:"   { u = $2 }
        tolower($1) == "suites:" { $1 = ""; s = $0 " " }
        END { if (u != "" && s ~ ("(^| )" cn "( |$)")) print u }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [opts] URI suite comp...
    sed -e 's/\[[^]]*\]//' "$f" | awk -v cn="$codename" '$1 == "deb" && $3 == cn { print $2 }'
  done
} | head -n1 | sed 's|/*$||' | grep .
