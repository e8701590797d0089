#!/usr/bin/env bash
# Prints the classpath of the ZooKeeper client and Curator jars the Java suites compile and
# run against (Debian's, in ZK_JAVA_LIB, default /usr/share/java). A missing jar prints
# `missing dependency: <jar>; run scripts/install-test-deps.sh` instead and exits 3.
set -u
LIB=${ZK_JAVA_LIB:-/usr/share/java}
cp=""
for j in zookeeper zookeeper-jute curator-client curator-framework curator-recipes guava slf4j-api; do
    if [ ! -f "$LIB/$j.jar" ]; then
        echo "missing dependency: $LIB/$j.jar; run scripts/install-test-deps.sh"
        exit 3
    fi
    cp="$cp${cp:+:}$LIB/$j.jar"
done
# optional: silences logging (otherwise SLF4J prints a one-time notice and uses its no-op logger)
[ -f "$LIB/slf4j-nop.jar" ] && cp="$cp:$LIB/slf4j-nop.jar"
echo "$cp"
