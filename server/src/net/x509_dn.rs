//! The subject of a client certificate as the x509 scheme names it: the distinguished name
//! in the RFC 2253 form Java's `X500Principal.getName()` prints.
//!
//! RDNs come last-to-first, joined by `,`; the AVAs of one RDN keep their order, joined by
//! `+`. The types CN, C, L, ST, O, OU, STREET, DC and UID are written by keyword, any other
//! as a dotted OID. A value of a known type held in a string type (Printable, T61, IA5,
//! General, BMP, UTF8) is written as text with `,=+<>#;"\` escaped by a backslash, NUL as
//! `\00`, and leading or trailing spaces (and CRs) escaped; any other value is `#` followed
//! by the lowercase hex of its DER encoding.

use x509_parser::der_parser::asn1_rs::{Any, Class, Tag};
use x509_parser::prelude::{FromDer, X509Certificate};

/// Keywords Java writes in RFC 2253 names, by OID.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject DN of a DER certificate, or why it could not be read.
pub(crate) fn subject_dn(cert_der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(cert_der)
        .map_err(|e| format!("unreadable client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|ava| {
                    let oid = ava.attr_type().to_id_string();
                    match KEYWORDS.iter().find(|(o, _)| *o == oid) {
                        Some((_, kw)) => match string_value(ava.attr_value()) {
                            Some(s) => format!("{kw}={}", escape(&s)),
                            None => format!("{kw}={}", hex_value(ava.attr_value())),
                        },
                        None => format!("{oid}={}", hex_value(ava.attr_value())),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// The text of a value held in one of the string types Java prints as text.
fn string_value(v: &Any<'_>) -> Option<String> {
    if v.class() != Class::Universal {
        return None;
    }
    let data = v.data;
    match v.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::GeneralString => {
            Some(String::from_utf8_lossy(data).into_owned())
        }
        // Teletex: read as ISO-8859-1, as Java does.
        Tag::T61String => Some(data.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    }
}

/// RFC 2253 escaping as Java applies it.
fn escape(value: &str) -> String {
    const ESCAPEES: &str = ",=+<>#;\"\\";
    let mut pieces: Vec<String> = Vec::with_capacity(value.len());
    for c in value.chars() {
        if ESCAPEES.contains(c) {
            pieces.push(format!("\\{c}"));
        } else if c == '\0' {
            pieces.push("\\00".into());
        } else {
            pieces.push(c.to_string());
        }
    }
    let joined: String = pieces.concat();
    let chars: Vec<char> = joined.chars().collect();
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = chars.iter().take_while(|c| blank(c)).count();
    let trail_len = chars.iter().rev().take_while(|c| blank(c)).count();
    let mut out = String::with_capacity(joined.len() + 2);
    for (i, c) in chars.iter().enumerate() {
        if i < lead || i >= chars.len() - trail_len.min(chars.len() - lead) {
            out.push('\\');
        }
        out.push(*c);
    }
    out
}

/// `#` and the lowercase hex of the value's DER encoding (tag, length, contents).
fn hex_value(v: &Any<'_>) -> String {
    let mut der = Vec::with_capacity(v.data.len() + 6);
    let class_bits = (v.class() as u8) << 6;
    let constructed = if v.header.is_constructed() { 0x20 } else { 0 };
    let tag = v.tag().0;
    if tag < 31 {
        der.push(class_bits | constructed | tag as u8);
    } else {
        der.push(class_bits | constructed | 0x1f);
        let mut groups = Vec::new();
        let mut t = tag;
        loop {
            groups.push((t & 0x7f) as u8);
            t >>= 7;
            if t == 0 {
                break;
            }
        }
        for (i, g) in groups.iter().enumerate().rev() {
            der.push(if i > 0 { g | 0x80 } else { *g });
        }
    }
    let len = v.data.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        der.push(0x80 | bytes.len() as u8);
        der.extend_from_slice(&bytes);
    }
    der.extend_from_slice(v.data);
    let mut out = String::from("#");
    for b in der {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_java() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a,b+c=d"), "a\\,b\\+c\\=d");
        assert_eq!(escape("#x;\"<>\\"), "\\#x\\;\\\"\\<\\>\\\\");
        assert_eq!(escape(" lead and trail  "), "\\ lead and trail\\ \\ ");
        assert_eq!(escape("   "), "\\ \\ \\ ");
        assert_eq!(escape("nul\0"), "nul\\00");
        assert_eq!(escape(""), "");
    }
}
