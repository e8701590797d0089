//! The server side of SASL DIGEST-MD5 (RFC 2831, `qop=auth`) as ZooKeeper runs it: protocol
//! `zookeeper`, server name and realm `zk-sasl-md5`. No I/O: the nonce comes from the caller.

use md5::{Digest, Md5};

use crate::SaslUsers;

/// The realm and server name ZooKeeper uses for DIGEST-MD5.
pub const REALM: &str = "zk-sasl-md5";
/// The SASL service (protocol) name.
pub const SERVICE: &str = "zookeeper";

/// Longest client response accepted (RFC 2831 limits it to 4096 bytes).
const MAX_RESPONSE: usize = 4096;

/// Where one connection's exchange stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestMd5 {
    /// No token seen yet: the next one must be empty and gets the challenge.
    Start,
    /// The challenge with this nonce was sent.
    Challenged { nonce: String },
    /// Authenticated as this user.
    Done,
}

/// What a step produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this token; more is expected.
    Continue(Vec<u8>),
    /// Send this token; the client is now authenticated as `user`.
    Complete { token: Vec<u8>, user: String },
}

/// Why the exchange failed (logged; the client only sees AUTHFAILED).
#[derive(Debug, PartialEq, Eq)]
pub struct Failed(pub String);

impl DigestMd5 {
    /// Evaluates the client's token. `nonce` is used when a challenge is made.
    pub fn step(&mut self, token: &[u8], users: &SaslUsers, nonce: &str) -> Result<Step, Failed> {
        match std::mem::replace(self, DigestMd5::Done) {
            DigestMd5::Start => {
                if !token.is_empty() {
                    return Err(Failed(
                        "DIGEST-MD5 must not have an initial response".into(),
                    ));
                }
                let challenge = format!(
                    "realm=\"{REALM}\",nonce=\"{nonce}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
                );
                *self = DigestMd5::Challenged {
                    nonce: nonce.to_string(),
                };
                Ok(Step::Continue(challenge.into_bytes()))
            }
            DigestMd5::Challenged { nonce } => {
                let (user, rspauth) = check_response(token, &nonce, users)?;
                Ok(Step::Complete {
                    token: format!("rspauth={rspauth}").into_bytes(),
                    user,
                })
            }
            DigestMd5::Done => Err(Failed("DIGEST-MD5 authentication already completed".into())),
        }
    }
}

/// Validates the client's digest-response; returns the user and the server's rspauth.
fn check_response(
    token: &[u8],
    nonce: &str,
    users: &SaslUsers,
) -> Result<(String, String), Failed> {
    let fail = |m: &str| Failed(format!("DIGEST-MD5: {m}"));
    if token.len() > MAX_RESPONSE {
        return Err(fail("response too long"));
    }
    let text = std::str::from_utf8(token).map_err(|_| fail("response is not UTF-8"))?;
    let fields = parse_directives(text).ok_or_else(|| fail("digest response format violation"))?;
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    };
    let utf8 = get("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
    let username = get("username").ok_or_else(|| fail("missing username"))?;
    let realm = get("realm").unwrap_or("");
    let cnonce = get("cnonce").ok_or_else(|| fail("missing cnonce"))?;
    let nc = get("nc").ok_or_else(|| fail("missing nc"))?;
    let qop = get("qop").unwrap_or("auth");
    let digest_uri = get("digest-uri").ok_or_else(|| fail("missing digest-uri"))?;
    let response = get("response").ok_or_else(|| fail("missing response"))?;
    let authzid = get("authzid");
    if get("nonce") != Some(nonce) {
        return Err(fail("nonce mismatch"));
    }
    if nc != "00000001" {
        return Err(fail("nonce count mismatch"));
    }
    if qop != "auth" {
        return Err(fail(&format!("unsupported qop {qop:?}")));
    }
    if !realm.is_empty() && realm != REALM {
        return Err(fail(&format!("unknown realm {realm:?}")));
    }
    let uri_ok = digest_uri.split_once('/').is_some_and(|(service, host)| {
        service.eq_ignore_ascii_case(SERVICE) && host.eq_ignore_ascii_case(REALM)
    });
    if !uri_ok {
        return Err(fail(&format!(
            "digest-uri {digest_uri:?} does not name this server"
        )));
    }
    let password = users.password(username).ok_or_else(|| {
        fail(&format!(
            "cannot acquire password for {username} in realm {realm}"
        ))
    })?;

    let mut h = Md5::new();
    h.update(encode(username, utf8));
    h.update(b":");
    h.update(encode(realm, utf8));
    h.update(b":");
    h.update(encode(password, utf8));
    let secret = h.finalize();
    let mut a1 = secret.to_vec();
    a1.extend_from_slice(format!(":{nonce}:{cnonce}").as_bytes());
    if let Some(z) = authzid {
        a1.push(b':');
        a1.extend_from_slice(z.as_bytes());
    }
    let ha1 = hex(&Md5::digest(&a1));
    let kd = |a2: &str| {
        let ha2 = hex(&Md5::digest(a2.as_bytes()));
        hex(&Md5::digest(
            format!("{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}").as_bytes(),
        ))
    };
    let expected = kd(&format!("AUTHENTICATE:{digest_uri}"));
    if !expected.eq_ignore_ascii_case(response) {
        return Err(fail(
            "digest response format violation. Mismatched response.",
        ));
    }
    Ok((username.to_string(), kd(&format!(":{digest_uri}"))))
}

/// With `charset=utf-8`, text made only of ISO-8859-1 characters is hashed in ISO-8859-1
/// (RFC 2831 2.1.2.1); otherwise as UTF-8.
fn encode(s: &str, utf8: bool) -> Vec<u8> {
    if !utf8 || s.chars().all(|c| (c as u32) < 0x100) {
        s.chars().map(|c| c as u32 as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `key=value` or `key="quoted\"value"` directives separated by commas.
fn parse_directives(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' {
                break;
            }
            key.push(c);
            chars.next();
        }
        chars.next()?; // '='
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.trim().to_string(), value.trim().to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> SaslUsers {
        let mut u = SaslUsers::new();
        u.insert("bob", "secret");
        u
    }

    /// A client computing its response the RFC 2831 way.
    fn client_response(user: &str, password: &str, nonce: &str, uri: &str) -> String {
        let cnonce = "OA6MHXh6VqTrRk";
        let secret = Md5::digest(format!("{user}:{REALM}:{password}").as_bytes());
        let mut a1 = secret.to_vec();
        a1.extend_from_slice(format!(":{nonce}:{cnonce}").as_bytes());
        let ha1 = hex(&Md5::digest(&a1));
        let ha2 = hex(&Md5::digest(format!("AUTHENTICATE:{uri}").as_bytes()));
        let resp = hex(&Md5::digest(
            format!("{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}").as_bytes(),
        ));
        format!(
            "charset=utf-8,username=\"{user}\",realm=\"{REALM}\",nonce=\"{nonce}\",nc=00000001,cnonce=\"{cnonce}\",digest-uri=\"{uri}\",maxbuf=65536,response={resp},qop=auth"
        )
    }

    #[test]
    fn full_exchange() {
        let mut s = DigestMd5::Start;
        let Ok(Step::Continue(ch)) = s.step(b"", &users(), "N1") else {
            panic!("no challenge");
        };
        let ch = String::from_utf8(ch).unwrap();
        assert!(ch.contains("nonce=\"N1\"") && ch.contains("realm=\"zk-sasl-md5\""));
        let resp = client_response("bob", "secret", "N1", "zookeeper/zk-sasl-md5");
        match s.step(resp.as_bytes(), &users(), "N2") {
            Ok(Step::Complete { token, user }) => {
                assert_eq!(user, "bob");
                assert!(token.starts_with(b"rspauth="));
                assert_eq!(token.len(), 8 + 32);
            }
            other => panic!("{other:?}"),
        }
        assert!(s.step(b"", &users(), "N3").is_err());
    }

    #[test]
    fn failures() {
        let start = || {
            let mut s = DigestMd5::Start;
            s.step(b"", &users(), "N1").unwrap();
            s
        };
        let wrong = client_response("bob", "wrong", "N1", "zookeeper/zk-sasl-md5");
        assert!(start().step(wrong.as_bytes(), &users(), "x").is_err());
        let unknown = client_response("eve", "secret", "N1", "zookeeper/zk-sasl-md5");
        assert!(start().step(unknown.as_bytes(), &users(), "x").is_err());
        let stale = client_response("bob", "secret", "N0", "zookeeper/zk-sasl-md5");
        assert!(start().step(stale.as_bytes(), &users(), "x").is_err());
        let uri = client_response("bob", "secret", "N1", "zookeeper/elsewhere");
        assert!(start().step(uri.as_bytes(), &users(), "x").is_err());
        assert!(start().step(b"garbage", &users(), "x").is_err());
        assert!(start()
            .step(b"username=\"unterminated", &users(), "x")
            .is_err());
        assert!(DigestMd5::Start.step(b"early", &users(), "x").is_err());
    }
}
