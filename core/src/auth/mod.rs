//! Authentication and authorization: ACL checks, SASL DIGEST-MD5, x509 identities, the
//! enforcement of authentication, and the SASL user table.

pub(crate) mod acl;
pub(crate) mod digest_md5;
pub mod sasl_users;
pub(crate) mod secure_auth;

#[cfg(test)]
mod secure_auth_tests;
