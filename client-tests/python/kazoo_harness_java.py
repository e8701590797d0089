"""Stands in for `java` when kazoo's own test harness starts "ZooKeeper", and runs zkd instead.

kazoo's harness (kazoo.testing) writes a zoo.cfg, JKS key and trust stores and a JAAS file,
then runs `java -cp ... -Dprop=value ... QuorumPeerMain ZOO_CFG`. Put a `java` that runs this
script first on PATH and that command starts `$ZKD_BINARY --config` on a copy of the zoo.cfg:

- the JKS stores (password from the zoo.cfg) are written out as PEM files, which zkd reads,
  and the client certificate is not asked for (ssl.clientAuth=none);
- but kazoo 2.11's harness makes X.509 v1 certificates, which ZooKeeper accepts and zkd's
  TLS stack (rustls with webpki) does not, neither as its own certificate nor from a client:
  with such a server certificate the secure port is left out (noted on stderr), so the
  harness's TLS test cannot pass against zkd while the others run;
- the JAAS file becomes --sasl-users and -Dzookeeper.DigestAuthenticationProvider.superDigest
  becomes --super-digest.

zkd replaces this process (exec), so the harness stops zkd as it would stop the JVM. A member
of a cluster (a zoo.cfg with several `server.N` lines) is run by kazoo_harness_ensemble.py as a
member of one zkd simulated ensemble shared by the cluster, without the secure port and the
AdminServer, and with read-only mode as `-Dreadonlymode.enabled` says.
"""

import base64
import os
import sys

import jks

import kazoo_harness_ensemble


def pem(kind, der):
    body = base64.encodebytes(der).decode("ascii")
    return "-----BEGIN %s-----\n%s-----END %s-----\n" % (kind, body, kind)


def der_length(der, i):
    """The length at der[i] and the index after it."""
    first = der[i]
    if first < 0x80:
        return first, i + 1
    n = first & 0x7F
    return int.from_bytes(der[i + 1 : i + 1 + n], "big"), i + 1 + n


def is_v3(cert_der):
    """Whether a certificate carries the explicit version field (v2/v3) rather than v1."""
    _, i = der_length(cert_der, 1)  # Certificate SEQUENCE
    _, i = der_length(cert_der, i + 1)  # TBSCertificate SEQUENCE
    return cert_der[i] == 0xA0


def read_cfg(path):
    entries = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                entries.append((key.strip(), value.strip()))
    return entries


def main():
    args = sys.argv[1:]
    cfg_path = args[-1]
    props = dict(a[2:].split("=", 1) for a in args if a.startswith("-D") and "=" in a)
    entries = read_cfg(cfg_path)
    cfg = dict(entries)
    work = os.path.dirname(os.path.abspath(cfg_path))

    out = [(k, v) for k, v in entries if not k.startswith("ssl.")]
    if "ssl.keyStore.location" in cfg:
        store = jks.KeyStore.load(
            cfg["ssl.keyStore.location"], cfg.get("ssl.keyStore.password", "")
        )
        entry = next(iter(store.private_keys.values()))
        if not is_v3(entry.cert_chain[0][1]):
            sys.stderr.write(
                "kazoo_harness_java: the server certificate is X.509 v1, which zkd cannot "
                "serve; starting without the secure port\n"
            )
            out = [(k, v) for k, v in out if k != "secureClientPort"]
            cfg = {}
    if "ssl.keyStore.location" in cfg:
        server_pem = os.path.join(work, "server-combined.pem")
        with open(server_pem, "w") as f:
            f.write(pem("PRIVATE KEY", entry.pkey_pkcs8))
            for _, der in entry.cert_chain:
                f.write(pem("CERTIFICATE", der))
        out += [
            ("ssl.keyStore.location", server_pem),
            ("ssl.keyStore.type", "PEM"),
            ("ssl.clientAuth", "none"),
        ]
    if "ssl.trustStore.location" in cfg:
        store = jks.KeyStore.load(
            cfg["ssl.trustStore.location"], cfg.get("ssl.trustStore.password", "")
        )
        ca_pem = os.path.join(work, "ca.pem")
        with open(ca_pem, "w") as f:
            for cert in store.certs.values():
                f.write(pem("CERTIFICATE", cert.cert))
        out += [("ssl.trustStore.location", ca_pem), ("ssl.trustStore.type", "PEM")]

    servers = kazoo_harness_ensemble.member_lines(entries)
    if len(servers) > 1:
        out = [
            (k, v)
            for k, v in out
            if not k.startswith(("ssl.", "server.", "admin.")) and k != "secureClientPort"
        ]
        out += servers + [
            ("admin.enableServer", "false"),
            ("readonlymode.enabled", props.get("readonlymode.enabled", "false")),
        ]

    zkd_cfg = os.path.join(work, "zkd.cfg")
    with open(zkd_cfg, "w") as f:
        f.write("".join("%s=%s\n" % kv for kv in out))

    command = [os.environ["ZKD_BINARY"], "--config", zkd_cfg, "--log", "warn"]
    jaas = props.get("java.security.auth.login.config")
    if jaas and os.path.exists(jaas) and os.path.getsize(jaas) > 0:
        command += ["--sasl-users", jaas]
    digest = props.get("zookeeper.DigestAuthenticationProvider.superDigest")
    if digest:
        command += ["--super-digest", digest]
    sys.stdout.flush()
    if len(servers) > 1:
        my_id = int(open(os.path.join(dict(entries)["dataDir"], "myid")).read().strip())
        kazoo_harness_ensemble.run_member(my_id, servers, command)
        return
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
