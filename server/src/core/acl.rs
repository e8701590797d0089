//! ACLs and identities (docs/protocol.md, "ACLs and authentication"): digest hashing, ACL validation with `auth`
//! expansion, the permission check, and getACL masking.

use base64::Engine;
use sha1::{Digest, Sha1};
use std::net::IpAddr;
use zkd_protocol::{perms, Acl, Id};

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

/// Validates an ACL list for create/setACL: drops exact duplicates, expands `auth` entries to
/// the caller's authenticated identities, and checks each scheme's id syntax.
pub fn fixup(acl: &[Acl], ids: &[Id]) -> Result<Vec<Acl>, InvalidAcl> {
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
        let masked = masked(&acl, &[id("ip", "10.1.2.3")]);
        assert_eq!(masked[1].id.id, "u:x");
    }
}
