//! ACLs and authentication through the unmodified `zookeeper-client` crate: a digest-protected
//! subtree, the `auth` scheme, getACL masking, ip ACLs, the super user and AUTHFAILED.

use zkd_client_tests::zk_rust;
use zkd_client_tests::zk_rust::{connect, with_acl, within, Ns};
use zkd_testkit::target::Target;
use zookeeper_client as zk;

const USER: &[u8] = b"user:pass";
/// base64(sha1("user:pass")), the id addauth digest user:pass yields.
const USER_ID: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";

/// Two sessions on the target and a namespace the first one creates.
async fn two_sessions(target: &Target, name: &str) -> (zk::Client, zk::Client, Ns) {
    let owner = connect(target).await;
    let other = connect(target).await;
    let ns = Ns::create(&owner, name).await;
    (owner, other, ns)
}

#[tokio::test(flavor = "multi_thread")]
async fn digest_protected_subtree() {
    let target = Target::start().await;
    let (owner, stranger, ns) = two_sessions(&target, "acl-digest").await;
    within("addauth", owner.auth("digest", USER)).await.unwrap();

    // `auth` expands to the caller's digest identity.
    let secret = format!("{}/secret", ns.root);
    let creator_all = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    owner
        .create(&secret, b"s3cret", &creator_all)
        .await
        .unwrap();
    let (acl, _) = owner.get_acl(&secret).await.unwrap();
    assert_eq!(
        acl,
        vec![zk::Acl::new(
            zk::Permission::ALL,
            zk::AuthId::new("digest", USER_ID)
        )]
    );

    // Without credentials every operation is refused; NOAUTH comes before BADVERSION.
    assert_eq!(stranger.get_data(&secret).await, Err(zk::Error::NoAuth));
    assert_eq!(
        stranger.set_data(&secret, b"x", Some(42)).await,
        Err(zk::Error::NoAuth)
    );
    assert_eq!(stranger.get_children(&secret).await, Err(zk::Error::NoAuth));
    let child = format!("{secret}/child");
    assert_eq!(
        stranger
            .create(&child, b"", &zk_rust::persistent())
            .await
            .map(|_| ()),
        Err(zk::Error::NoAuth)
    );
    // The `auth` scheme with no authenticated identity is an invalid ACL.
    assert_eq!(
        stranger
            .create(&format!("{}/mine", ns.root), b"", &creator_all)
            .await
            .map(|_| ()),
        Err(zk::Error::InvalidAcl)
    );

    // The same credentials on another session open it up.
    within("addauth", stranger.auth("digest", USER))
        .await
        .unwrap();
    let (data, _) = stranger.get_data(&secret).await.unwrap();
    assert_eq!(data, b"s3cret");
    stranger
        .create(&child, b"", &zk_rust::persistent())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn get_acl_masks_digests_without_admin() {
    let target = Target::start().await;
    let (owner, reader, ns) = two_sessions(&target, "acl-mask").await;
    let node = format!("{}/n", ns.root);
    let acls = [
        zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", USER_ID)),
        zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone()),
    ];
    owner.create(&node, b"v", &with_acl(&acls)).await.unwrap();
    let (seen, _) = reader.get_acl(&node).await.unwrap();
    assert_eq!(
        seen[0],
        zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", "user:x"))
    );
    assert_eq!(seen[1], acls[1]);
    within("addauth", reader.auth("digest", USER))
        .await
        .unwrap();
    let (seen, _) = reader.get_acl(&node).await.unwrap();
    assert_eq!(seen, acls.to_vec(), "with ADMIN the real ids are shown");
    // setACL needs ADMIN; the reader now has it through the digest entry.
    let stat = reader
        .set_acl(&node, &zk::Acls::anyone_all(), Some(0))
        .await
        .unwrap();
    assert_eq!(stat.aversion, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn ip_acls_match_by_cidr() {
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, "acl-ip").await;
    let local = [zk::Acl::new(
        zk::Permission::ALL,
        zk::AuthId::new("ip", "127.0.0.0/8"),
    )];
    let remote = [zk::Acl::new(
        zk::Permission::ALL,
        zk::AuthId::new("ip", "10.0.0.0/8"),
    )];
    let here = format!("{}/here", ns.root);
    let there = format!("{}/there", ns.root);
    client.create(&here, b"h", &with_acl(&local)).await.unwrap();
    client
        .create(&there, b"t", &with_acl(&remote))
        .await
        .unwrap();
    assert_eq!(client.get_data(&here).await.unwrap().0, b"h");
    assert_eq!(client.get_data(&there).await, Err(zk::Error::NoAuth));
    let bad = [zk::Acl::new(
        zk::Permission::ALL,
        zk::AuthId::new("ip", "not-an-address"),
    )];
    assert_eq!(
        client
            .create(&format!("{}/bad", ns.root), b"", &with_acl(&bad))
            .await
            .map(|_| ()),
        Err(zk::Error::InvalidAcl)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_auth_scheme_fails_the_session() {
    let target = Target::start().await;
    let client = connect(&target).await;
    let result = within("addauth", client.auth("no-such-scheme", b"x")).await;
    assert_eq!(result, Err(zk::Error::AuthFailed));
}

/// The super user configured with `--super-digest` bypasses every ACL (zkd only: the flag is
/// zkd's spelling of ZooKeeper's superDigest system property).
#[tokio::test(flavor = "multi_thread")]
async fn super_digest_bypasses_acls() {
    let config = zkd_server::Config {
        super_digest: Some("super:lK75jTNcA+U9vtVEw5vB51mj/w4=".into()),
        ..Default::default()
    };
    let target = Target::start_zkd_with(config).await;
    let owner = connect(&target).await;
    let admin = connect(&target).await;
    within("addauth", owner.auth("digest", USER)).await.unwrap();
    let creator_all = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    owner.create("/locked", b"l", &creator_all).await.unwrap();
    assert_eq!(admin.get_data("/locked").await, Err(zk::Error::NoAuth));
    within("addauth", admin.auth("digest", b"super:wrong"))
        .await
        .unwrap();
    assert_eq!(admin.get_data("/locked").await, Err(zk::Error::NoAuth));
    within("addauth", admin.auth("digest", b"super:secret"))
        .await
        .unwrap();
    assert_eq!(admin.get_data("/locked").await.unwrap().0, b"l");
    admin.delete("/locked", None).await.unwrap();
}
