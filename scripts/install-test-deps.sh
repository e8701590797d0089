#!/usr/bin/env bash
# Installs everything the end-to-end tests need on a Debian 12 machine:
#   * Apache ZooKeeper 3.8.0 (Debian 12's package) and 3.9.3 (Debian 13's libzookeeper-java,
#     unpacked into $ZK39_DIR without touching the system's packages): the reference servers
#     the differential and end-to-end tests compare against,
#   * the Java client and Curator jars (unmodified Java clients driven by the tests),
#   * a JDK with javac (to compile the small Java test drivers),
#   * python3 + pip and kazoo (the Python client),
#   * Jetty and the servlet API (the oracle's AdminServer), chromium and chromium-driver (the
#     headless browser the web view test drives),
#   * a C++ compiler (libFuzzer, built by scripts/fuzz.sh),
#   * iproute2 and nftables (the ZooKeeper ensemble in network namespaces that partitions are
#     checked against).
#
# Run as root. Non-interactive and idempotent: when everything is already present it only
# checks and returns within a second or two.
#
# Environment:
#   KAZOO_VERSION   kazoo version to install with pip (default 2.11.0)
#   PURE_SASL_VERSION  pure-sasl version (kazoo's SASL DIGEST-MD5; default 0.6.2)
#   PYTHON          python interpreter to install kazoo for (default: python3 on PATH)
#   MATURIN_VERSION maturin version to install with pip (default 1.9.6)
#   KAZOO_SUITE_VENV virtualenv for kazoo's own test suite (default /opt/zkd-test/kazoo-suite)
#   ZK39_DIR        where ZooKeeper 3.9.3 is unpacked (default /opt/zkd-test/zookeeper-3.9.3)
set -euo pipefail

KAZOO_VERSION="${KAZOO_VERSION:-2.11.0}"
PURE_SASL_VERSION="${PURE_SASL_VERSION:-0.6.2}"
PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '[install-test-deps] %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        log "must run as root (or with sudo available)"
        exit 1
    fi
fi

APT_PACKAGES=(
    zookeeper
    zookeeper-bin
    libzookeeper-java
    libcurator-recipes-java
    libcurator-framework-java
    libcurator-client-java
    junit5             # java/zkd-testing: the JUnit 5 extension and its test (console launcher)
    libslf4j-java      # slf4j-simple.jar: the oracle's logging backend
    ca-certificates    # pip over https
    python3
    python3-pip
    libjetty9-java       # the oracle's AdminServer (embedded Jetty), for the admin differential test
    libservlet-api-java  # servlet-api.jar, which that Jetty needs
    chromium             # the headless browser that drives the web view test
    chromium-driver      # its WebDriver server
    g++                  # builds libFuzzer for scripts/fuzz.sh
    python3-venv       # scripts/test-packages.sh: the wheel is tested in a fresh virtualenv
    make               # builds jemalloc, the zkd binary's allocator
    util-linux         # prlimit: the memory tests run zkd under an address-space limit
    iproute2           # ip and tc: the namespaced ZooKeeper ensemble (its bridge, veths, netem)
    nftables           # nft: the namespaced ensemble's partitions (drop rules per member)
)

# A JDK with javac: keep whatever is installed (java 17 on the reference machines) and only add
# Debian's default headless JDK when no compiler is available.
if ! command -v javac >/dev/null 2>&1; then
    APT_PACKAGES+=(default-jdk-headless)
fi

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    log "apt: all ${#APT_PACKAGES[@]} packages already installed, skipping apt-get"
else
    log "apt: installing ${missing[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
    log "apt: done"
fi

# The Debian package may register a system service listening on port 2181. The tests start
# their own servers on free ports, so it is harmless; it is left alone either way.

for f in /usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar \
    /usr/share/java/slf4j-simple.jar /usr/share/java/curator-recipes.jar; do
    if [ ! -e "$f" ]; then
        log "expected $f after installing packages, but it is missing"
        exit 1
    fi
done
# ZooKeeper 3.9.3: Debian 13 (trixie) packages it. Its .deb is fetched with apt-get's own
# client but with a sources list, state and cache of its own (under $ZK39_APT), naming the
# mirror the system already uses with suite trixie: the system's sources stay as they are and
# nothing else is installed or upgraded. The jar runs on Debian 12's Java 17 with the
# dependency jars installed above (the launcher puts its own zookeeper-jute.jar first on the
# class path: the jar's manifest names the system's 3.8 one).
ZK39_DIR="${ZK39_DIR:-/opt/zkd-test/zookeeper-3.9.3}"
ZK39_APT="${ZK39_APT:-/opt/zkd-test/trixie}"
ZK39_JARS="$ZK39_DIR/usr/share/java"
if [ -f "$ZK39_JARS/zookeeper.jar" ] && [ -f "$ZK39_JARS/zookeeper-jute.jar" ] \
    && [ -f "$ZK39_DIR/.version" ] && grep -q '^3\.9\.3' "$ZK39_DIR/.version"; then
    log "zookeeper 3.9: $(cat "$ZK39_DIR/.version") already in $ZK39_DIR"
else
    # The mirror of the system's own Debian sources (deb822 or one-line format).
    mirror="$(grep -rhoE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]+/debian/?([[:space:]]|$)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
        | grep -oE '[a-z]+://[^[:space:]]+' | head -n1 || true)"
    if [ -z "$mirror" ]; then
        log "zookeeper 3.9: no Debian mirror found in /etc/apt/sources.list*"
        exit 1
    fi
    log "zookeeper 3.9: fetching libzookeeper-java from suite trixie of the system's mirror"
    $SUDO mkdir -p "$ZK39_APT/state/lists/partial" "$ZK39_APT/cache/archives/partial" "$ZK39_APT/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror%/} trixie main" \
        | $SUDO tee "$ZK39_APT/sources.list" >/dev/null
    $SUDO touch "$ZK39_APT/state/status"
    apt_trixie=(-o "Dir::Etc::SourceList=$ZK39_APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State=$ZK39_APT/state" -o "Dir::State::status=$ZK39_APT/state/status"
        -o "Dir::Cache=$ZK39_APT/cache" -o APT::Sandbox::User=root)
    $SUDO apt-get "${apt_trixie[@]}" update -qq
    version="$(apt-cache "${apt_trixie[@]}" show libzookeeper-java | sed -n 's/^Version: //p' | head -n1)"
    case "$version" in
        3.9.3*) ;;
        *) log "zookeeper 3.9: trixie offers libzookeeper-java ${version:-nothing}, expected 3.9.3"; exit 1 ;;
    esac
    rm_debs=("$ZK39_APT"/debs/libzookeeper-java_*.deb)
    $SUDO rm -f "${rm_debs[@]}"
    (cd "$ZK39_APT/debs" && $SUDO apt-get "${apt_trixie[@]}" download -qq "libzookeeper-java=$version")
    $SUDO rm -rf "$ZK39_DIR"
    $SUDO mkdir -p "$ZK39_DIR"
    $SUDO dpkg-deb -x "$ZK39_APT"/debs/libzookeeper-java_*.deb "$ZK39_DIR"
    echo "$version" | $SUDO tee "$ZK39_DIR/.version" >/dev/null
    log "zookeeper 3.9: libzookeeper-java $version unpacked into $ZK39_DIR"
fi
for f in "$ZK39_JARS/zookeeper.jar" "$ZK39_JARS/zookeeper-jute.jar"; do
    if [ ! -e "$f" ]; then
        log "expected $f after unpacking ZooKeeper 3.9.3, but it is missing"
        exit 1
    fi
done

log "java: $(java -version 2>&1 | head -n1)"
log "javac: $(javac -version 2>&1 | head -n1)"

# pip_pin DIST VERSION: installs DIST==VERSION with the interpreter's own pip unless that
# version is there. Debian's system python is "externally managed" (PEP 668), which needs
# --break-system-packages for a system-wide install.
pip_pin() {
    local dist=$1 version=$2 installed pip_args stdlib
    installed="$("$PYTHON" -c "import importlib.metadata as m; print(m.version('$dist'))" 2>/dev/null || true)"
    if [ "$installed" = "$version" ]; then
        log "pip: $dist $version already installed for $("$PYTHON" -c 'import sys; print(sys.executable)')"
        return
    fi
    pip_args=(install --quiet --disable-pip-version-check --root-user-action=ignore "$dist==$version")
    stdlib="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
    if [ -e "$stdlib/EXTERNALLY-MANAGED" ]; then
        pip_args+=(--break-system-packages)
    fi
    log "pip: installing $dist==$version (found: ${installed:-none})"
    $SUDO "$PYTHON" -m pip "${pip_args[@]}"
    log "pip: $dist $("$PYTHON" -c "import importlib.metadata as m; print(m.version('$dist'))")"
}

pip_pin kazoo "$KAZOO_VERSION"
# kazoo's SASL (DIGEST-MD5) support.
pip_pin pure-sasl "$PURE_SASL_VERSION"
# scripts/test-packages.sh builds the zkd wheel with maturin.
MATURIN_VERSION="${MATURIN_VERSION:-1.9.6}"
pip_pin maturin "$MATURIN_VERSION"

# kazoo's own test suite (kazoo.tests, shipped in kazoo's wheel) needs what its harness
# imports: pyOpenSSL and pyjks (it makes certificates and JKS stores) and pytest. They live in
# a virtualenv of their own, so these pins never change the interpreter's packages.
KAZOO_SUITE_VENV="${KAZOO_SUITE_VENV:-/opt/zkd-test/kazoo-suite}"
KAZOO_SUITE_PINS=("kazoo==$KAZOO_VERSION" "pure-sasl==$PURE_SASL_VERSION" "pyopenssl==24.2.1"
    "pyjks==20.0.0" "pytest==8.3.5")
if "$KAZOO_SUITE_VENV/bin/python" -m pip freeze 2>/dev/null | grep -qixF "pyopenssl==24.2.1" \
    && "$KAZOO_SUITE_VENV/bin/python" -m pip freeze 2>/dev/null | grep -qixF "kazoo==$KAZOO_VERSION"; then
    log "kazoo suite: virtualenv $KAZOO_SUITE_VENV ready"
else
    log "kazoo suite: making $KAZOO_SUITE_VENV with ${KAZOO_SUITE_PINS[*]}"
    $SUDO "$PYTHON" -m venv "$KAZOO_SUITE_VENV"
    $SUDO "$KAZOO_SUITE_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --root-user-action=ignore "${KAZOO_SUITE_PINS[@]}"
fi

log "all test dependencies present"
