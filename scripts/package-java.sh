#!/usr/bin/env bash
# Builds target/java/zkd-testing-<version>.jar, the one jar a Java project adds:
# ZkdTestingServer, ZkdTestingCluster, the JUnit 5 extension, and the statically linked zkd
# for Linux x86_64 as a resource (zkd/testing/bin/linux-x86_64/zkd with its SHA-256), which
# ZkdBinary.find() extracts to a per-user cache when nothing else names a binary.
#
#   usage: scripts/package-java.sh
#
# Environment:
#   ZKD_DIST_BINARY  the static binary to carry (default: build it with scripts/release.sh,
#                    which then calls this script)
#   ZK_JAVA_LIB      directory holding zookeeper.jar and Debian's JUnit 5 jars (/usr/share/java)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -n "${ZKD_DIST_BINARY:-}" ] || exec bash scripts/release.sh jar

bin=$ZKD_DIST_BINARY
[ -x "$bin" ] || { echo "package-java: ZKD_DIST_BINARY=$bin is not an executable" >&2; exit 3; }
case "$(file -b "$bin")" in
    *"statically linked"* | *"static-pie linked"*) ;;
    *) echo "package-java: $bin is not statically linked; build it with scripts/release.sh" >&2; exit 1 ;;
esac
version=$("$bin" --version | awk '{print $2}')
[ -n "$version" ] || { echo "package-java: $bin --version printed no version" >&2; exit 1; }

LIB=${ZK_JAVA_LIB:-/usr/share/java}
[ -f "$LIB/junit-jupiter-api.jar" ] \
    || { echo "package-java: the JUnit 5 extension needs $LIB/junit-jupiter-api.jar (Debian's junit5; scripts/install-test-deps.sh)" >&2; exit 3; }

BUILD=$ROOT/target/java/build
OUT=$BUILD bash java/zkd-testing/build.sh
res=$BUILD/resources
rm -rf "$res"
mkdir -p "$res/zkd/testing/bin/linux-x86_64"
install -m 0755 "$bin" "$res/zkd/testing/bin/linux-x86_64/zkd"
sha256sum "$bin" | cut -d' ' -f1 >"$res/zkd/testing/bin/linux-x86_64/zkd.sha256"
printf '%s\n' "$version" >"$res/zkd/testing/bin/linux-x86_64/version"
cat >"$BUILD/manifest.txt" <<EOF
Implementation-Title: zkd-testing
Implementation-Version: $version
Automatic-Module-Name: zkd.testing
EOF
jar_file=$ROOT/target/java/zkd-testing-$version.jar
rm -f "$jar_file"
jar --create --file "$jar_file" --manifest "$BUILD/manifest.txt" \
    -C "$BUILD/classes" . -C "$BUILD/junit5-classes" . -C "$res" .
echo "[package-java] wrote target/java/zkd-testing-$version.jar ($(du -k "$jar_file" | cut -f1) KiB; binary sha256 $(cat "$res/zkd/testing/bin/linux-x86_64/zkd.sha256"))"
