//! ACLs and identities (docs/protocol.md, "ACLs and authentication"): digest hashing, ACL validation with `auth`
//! expansion, the permission check, and getACL masking.

use base64::Engine;
use sha1::{Digest, Sha1};
use std::net::IpAddr;
use zkd_protocol::{perms, Acl, Id};

use crate::AuthConfig;

/// `user:base64(sha1("user:password"))` for an addauth digest credential.
pub fn digest_id(credential: &str) -> String {
    let user = credential.split(':').next().unwrap_or("");
    let hash = Sha1::digest(credential.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// Why an ACL list was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct InvalidAcl;

/// [`fixup_with`] on a server with only the built-in schemes (world, auth, digest, ip).
pub fn fixup(acl: &[Acl], ids: &[Id]) -> Result<Vec<Acl>, InvalidAcl> {
    fixup_with(acl, ids, &AuthConfig::default())
}

/// Validates an ACL list for create/setACL: drops exact duplicates, expands `auth` entries to
/// the caller's authenticated identities, and checks each scheme's id syntax. The x509 and
/// sasl schemes are known only when `auth` configures them, as ZooKeeper knows only the
/// providers it registered.
pub fn fixup_with(acl: &[Acl], ids: &[Id], auth: &AuthConfig) -> Result<Vec<Acl>, InvalidAcl> {
    if acl.is_empty() {
        return Err(InvalidAcl);
    }
    let mut out: Vec<Acl> = Vec::with_capacity(acl.len());
    let push = |a: Acl, out: &mut Vec<Acl>| {
        if !out.contains(&a) {
            out.push(a);
        }
    };
    for entry in acl {
        match entry.id.scheme.as_str() {
            "world" if entry.id.id == "anyone" => push(entry.clone(), &mut out),
            "auth" => {
                let mut any = false;
                for id in ids.iter().filter(|id| is_authenticated_scheme(&id.scheme)) {
                    any = true;
                    push(
                        Acl {
                            perms: entry.perms,
                            id: id.clone(),
                        },
                        &mut out,
                    );
                }
                if !any {
                    return Err(InvalidAcl);
                }
            }
            "digest" if valid_digest_id(&entry.id.id) => push(entry.clone(), &mut out),
            "ip" if parse_ip_acl(&entry.id.id).is_some() => push(entry.clone(), &mut out),
            "x509" if auth.x509 && valid_dn(&entry.id.id) => push(entry.clone(), &mut out),
            "sasl" if auth.sasl_users.is_some() && valid_kerberos_name(&entry.id.id) => {
                push(entry.clone(), &mut out)
            }
            _ => return Err(InvalidAcl),
        }
    }
    Ok(out)
}

fn is_authenticated_scheme(scheme: &str) -> bool {
    matches!(scheme, "digest" | "sasl" | "x509")
}

/// `user:hash`: splitting on `:` with trailing empty parts dropped gives exactly two parts.
fn valid_digest_id(id: &str) -> bool {
    let mut parts: Vec<&str> = id.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.len() == 2
}

/// A Kerberos-style name as ZooKeeper's SASL provider accepts it: anything without `@`, or
/// `name[/host]@realm` with no further `/` or `@`.
fn valid_kerberos_name(id: &str) -> bool {
    let Some((principal, realm)) = id.split_once('@') else {
        return true;
    };
    if realm.contains(['/', '@']) {
        return false;
    }
    principal.split('/').count() <= 2
}

/// Attribute keywords a Java X500Principal accepts in a distinguished name.
const DN_KEYWORDS: &[&str] = &[
    "CN",
    "C",
    "L",
    "S",
    "ST",
    "O",
    "OU",
    "T",
    "IP",
    "STREET",
    "DC",
    "DNQUALIFIER",
    "DNQ",
    "SURNAME",
    "GIVENNAME",
    "INITIALS",
    "GENERATION",
    "EMAIL",
    "EMAILADDRESS",
    "UID",
    "SERIALNUMBER",
];

/// Whether `dn` parses as a distinguished name (`type=value` pairs separated by `,`, `;` or
/// `+`, backslash escapes, types being known keywords or OIDs); the empty name is valid.
fn valid_dn(dn: &str) -> bool {
    if dn.trim().is_empty() {
        return true;
    }
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = dn.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return false,
                }
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' | ';' | '+' if !quoted => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return false;
    }
    parts.push(cur);
    parts.iter().all(|ava| {
        let Some((key, _value)) = ava.split_once('=') else {
            return false;
        };
        let key = key.trim();
        let oid = key
            .strip_prefix("OID.")
            .or_else(|| key.strip_prefix("oid."))
            .unwrap_or(key);
        DN_KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(key))
            || (!oid.is_empty()
                && oid.split('.').count() >= 2
                && oid
                    .split('.')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
    })
}

/// An IPv4 address with optional `/bits` (0..=32).
fn parse_ip_acl(id: &str) -> Option<(u32, u32)> {
    let (addr, bits) = match id.split_once('/') {
        Some((a, b)) => (a, b.parse::<u32>().ok().filter(|b| *b <= 32)?),
        None => (id, 32),
    };
    let octets: Vec<&str> = addr.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut value = 0u32;
    for o in octets {
        value = (value << 8) | o.parse::<u8>().ok()? as u32;
    }
    Some((value, bits))
}

fn ip_matches(acl_id: &str, remote: &str) -> bool {
    let (Some((net, bits)), Ok(IpAddr::V4(addr))) = (parse_ip_acl(acl_id), remote.parse()) else {
        return false;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from(addr) & mask) == (net & mask)
}

/// Whether identities `ids` hold permission `perm` on a node with ACL `acl`.
pub fn allowed(acl: &[Acl], perm: i32, ids: &[Id]) -> bool {
    if acl.is_empty() || ids.iter().any(|id| id.scheme == "super") {
        return true;
    }
    acl.iter().filter(|a| a.perms & perm != 0).any(|a| {
        (a.id.scheme == "world" && a.id.id == "anyone")
            || ids.iter().any(|id| {
                id.scheme == a.id.scheme
                    && match a.id.scheme.as_str() {
                        "ip" => ip_matches(&a.id.id, &id.id),
                        // The SASL provider lets a user named "super" match every sasl ACL.
                        "sasl" => id.id == "super" || a.id.id == id.id,
                        _ => a.id.id == id.id,
                    }
            })
    })
}

/// The ACL getACL returns: digest hashes become `x` for callers without ADMIN.
pub fn masked(acl: &[Acl], ids: &[Id]) -> Vec<Acl> {
    if allowed(acl, perms::ADMIN, ids) {
        return acl.to_vec();
    }
    acl.iter()
        .map(|a| {
            if a.id.scheme == "digest" {
                let user = a.id.id.split(':').next().unwrap_or("");
                Acl::new(a.perms, "digest", &format!("{user}:x"))
            } else {
                a.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str, i: &str) -> Id {
        Id {
            scheme: s.into(),
            id: i.into(),
        }
    }

    #[test]
    fn digest_vectors_from_the_reference() {
        assert_eq!(digest_id("user:pass"), "user:smGaoVKd/cQkjm7b88GyorAUz20=");
        assert_eq!(
            digest_id("super:secret"),
            "super:lK75jTNcA+U9vtVEw5vB51mj/w4="
        );
        assert_eq!(digest_id("nocolon"), "nocolon:Ra+cHr2ZoHvBjtNArFGNGlVie4g=");
    }

    #[test]
    fn fixup_rules() {
        let ip = id("ip", "127.0.0.1");
        let dg = id("digest", "user:smGaoVKd/cQkjm7b88GyorAUz20=");
        let open = Acl::new(31, "world", "anyone");
        assert_eq!(
            fixup(&[open.clone(), open.clone()], &[]),
            Ok(vec![open.clone()])
        );
        assert_eq!(fixup(&[], &[]), Err(InvalidAcl));
        assert_eq!(fixup(&[Acl::new(31, "world", "x")], &[]), Err(InvalidAcl));
        assert_eq!(
            fixup(&[Acl::new(31, "auth", "")], std::slice::from_ref(&ip)),
            Err(InvalidAcl)
        );
        assert_eq!(
            fixup(&[Acl::new(31, "auth", "")], &[ip.clone(), dg.clone()]),
            Ok(vec![Acl {
                perms: 31,
                id: dg.clone()
            }])
        );
        assert_eq!(fixup(&[Acl::new(1, "ip", "::1")], &[]), Err(InvalidAcl));
        assert!(fixup(&[Acl::new(1, "ip", "10.0.0.0/8")], &[]).is_ok());
        assert_eq!(fixup(&[Acl::new(1, "super", "")], &[]), Err(InvalidAcl));
        assert_eq!(
            fixup(&[Acl::new(1, "digest", "nocolon")], &[]),
            Err(InvalidAcl)
        );
        assert!(fixup(&[Acl::new(0xff, "digest", "u:h")], &[]).is_ok());
        // x509 and sasl are known only when configured.
        let x509 = Acl::new(31, "x509", "CN=client,O=zkd");
        let sasl = Acl::new(31, "sasl", "bob");
        assert_eq!(fixup(std::slice::from_ref(&x509), &[]), Err(InvalidAcl));
        assert_eq!(fixup(std::slice::from_ref(&sasl), &[]), Err(InvalidAcl));
        let auth = AuthConfig {
            x509: true,
            sasl_users: Some(Default::default()),
            ..AuthConfig::default()
        };
        assert!(fixup_with(&[x509, sasl], &[], &auth).is_ok());
        for bad in ["CN", "FOO=bar", "CN=a,", "CN=a\\", "CN=\"x"] {
            assert_eq!(
                fixup_with(&[Acl::new(1, "x509", bad)], &[], &auth),
                Err(InvalidAcl),
                "{bad}"
            );
        }
        for good in ["", "CN=a\\,b,OU=x+UID=3", "2.5.4.3=x", "OID.2.5.4.3=x;C=DE"] {
            assert!(
                fixup_with(&[Acl::new(1, "x509", good)], &[], &auth).is_ok(),
                "{good}"
            );
        }
        for (name, ok) in [
            ("bob", true),
            ("zk/host@REALM", true),
            ("a@b@c", false),
            ("a/b/c@R", false),
        ] {
            assert_eq!(
                fixup_with(&[Acl::new(1, "sasl", name)], &[], &auth).is_ok(),
                ok,
                "{name}"
            );
        }
        // An auth entry expands to x509 and sasl identities too.
        let ids = [id("x509", "CN=c"), id("sasl", "bob")];
        assert_eq!(
            fixup_with(&[Acl::new(31, "auth", "")], &ids, &auth).map(|v| v.len()),
            Ok(2)
        );
    }

    #[test]
    fn permission_checks() {
        let acl = vec![
            Acl::new(perms::READ, "ip", "10.1.0.0/16"),
            Acl::new(31, "digest", "u:h"),
        ];
        assert!(allowed(&acl, perms::READ, &[id("ip", "10.1.2.3")]));
        assert!(!allowed(&acl, perms::WRITE, &[id("ip", "10.1.2.3")]));
        assert!(!allowed(&acl, perms::READ, &[id("ip", "10.2.2.3")]));
        assert!(allowed(&acl, perms::WRITE, &[id("digest", "u:h")]));
        assert!(allowed(&acl, perms::WRITE, &[id("super", "")]));
        assert!(allowed(&[], perms::WRITE, &[]));
        let sasl = vec![Acl::new(perms::READ, "sasl", "bob")];
        assert!(allowed(&sasl, perms::READ, &[id("sasl", "bob")]));
        assert!(allowed(&sasl, perms::READ, &[id("sasl", "super")]));
        assert!(!allowed(&sasl, perms::READ, &[id("sasl", "eve")]));
        assert!(!allowed(&sasl, perms::READ, &[id("x509", "bob")]));
        let masked = masked(&acl, &[id("ip", "10.1.2.3")]);
        assert_eq!(masked[1].id.id, "u:x");
    }
}
