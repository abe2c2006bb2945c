//! Unit tests of the users table: hashes, Redis's default-user semantics, validation.

use super::*;

fn entry(name: &str, password: &str) -> UserEntry {
    UserEntry {
        name: name.into(),
        password: Some(hash_password(password)),
        commands: None,
        key_prefix: None,
        databases: None,
        enabled: true,
    }
}

#[test]
fn hashes_are_salted_and_verify_their_password_only() {
    let a = hash_password("secret");
    let b = hash_password("secret");
    assert_ne!(a, b, "a fresh salt each time");
    let parts: Vec<&str> = a.split('$').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0], "sha256");
    assert_eq!(parts[1].len(), SALT_LEN * 2);
    assert_eq!(parts[2].len(), 64);
    let h = PasswordHash::parse(&a).unwrap();
    assert!(h.verify(b"secret"));
    assert!(!h.verify(b"secret "));
    assert!(!h.verify(b""));
    assert!(is_password_hash(&a));
}

#[test]
fn the_hash_is_sha256_of_salt_then_password() {
    // sha256("ab" ‖ "c") = sha256("abc"): the documented construction, checkable by hand.
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    let h = PasswordHash::parse(&format!("sha256${}${abc}", hex::encode("ab"))).unwrap();
    assert!(h.verify(b"c"));
    assert!(PasswordHash::parse(&format!("SHA256$6162${abc}")).is_none());
}

#[test]
fn malformed_hashes_are_refused() {
    let digest = "0".repeat(64);
    for bad in [
        "",
        "secret",
        "sha256$$",
        &format!("sha256$$${digest}"),
        &format!("sha256$zz${digest}"),
        &format!("sha256$00${}", "0".repeat(62)),
        &format!("sha256$00${digest}$x"),
        &format!("md5$00${digest}"),
        &format!("sha256${}${digest}", "00".repeat(65)),
    ] {
        assert!(!is_password_hash(bad), "{bad:?} should not parse");
    }
    let mut e = entry("alice", "pw");
    e.password = Some("plain-text".into());
    assert_eq!(
        Users::new(&[e], None, 0, Source::Config).unwrap_err(),
        UsersError::BadHash {
            user: "alice".into()
        }
    );
}

#[test]
fn a_disabled_user_cannot_log_in_even_with_its_password() {
    let mut alice = entry("alice", "pw");
    alice.enabled = false;
    let users = Users::new(&[alice], None, 0, Source::Config).unwrap();
    assert!(users.authenticate(b"alice", b"pw").is_none());
}

#[test]
fn entries_are_validated_with_the_reason() {
    let no_pw = UserEntry {
        password: None,
        ..entry("alice", "x")
    };
    assert_eq!(
        Users::new(&[no_pw], None, 0, Source::Config).unwrap_err(),
        UsersError::NoPassword("alice".into())
    );
    for bad in [
        "",
        "with space",
        "tab\there",
        "é",
        &"x".repeat(MAX_NAME_LEN + 1),
    ] {
        let e = entry(bad, "x");
        assert!(
            matches!(
                Users::new(&[e], None, 0, Source::Config),
                Err(UsersError::BadName(_))
            ),
            "{bad:?}"
        );
    }
    assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
    let mut e = entry("alice", "x");
    e.commands = Some(vec!["read".into(), "admn".into()]);
    let err = Users::new(&[e], None, 0, Source::Config).unwrap_err();
    assert!(
        err.to_string().contains("unknown command class \"admn\""),
        "{err}"
    );
    assert!(
        err.to_string().contains("keyspace"),
        "lists the known ones: {err}"
    );
    for prefix in ["", "a\nb", &"p".repeat(MAX_KEY_PREFIX_LEN + 1)] {
        let mut e = entry("alice", "x");
        e.key_prefix = Some(prefix.into());
        assert_eq!(
            Users::new(&[e], None, 0, Source::Config).unwrap_err(),
            UsersError::BadKeyPrefix {
                user: "alice".into()
            }
        );
    }
    assert_eq!(
        Users::new(&[entry("a", "x"), entry("a", "y")], None, 0, Source::Config).unwrap_err(),
        UsersError::Duplicate("a".into())
    );
    let many: Vec<UserEntry> = (0..=MAX_USERS)
        .map(|i| UserEntry {
            password: Some("sha256$00$".to_owned() + &"0".repeat(64)),
            ..entry(&format!("u{i}"), "")
        })
        .collect();
    assert_eq!(
        Users::new(&many, None, 0, Source::Config).unwrap_err(),
        UsersError::TooMany(MAX_USERS + 1)
    );
}

#[test]
fn classes_parse_case_insensitively_and_normalize() {
    let (bits, names) =
        parse_classes("u", &["READ".into(), "read".into(), "Keyspace".into()]).unwrap();
    assert_eq!(bits, class::READ | KEYSPACE);
    assert_eq!(names, ["read", "keyspace"]);
    let (bits, _) = parse_classes("u", &[]).unwrap();
    assert_eq!(bits, 0);
    let long: Vec<String> = (0..100).map(|_| "read".to_owned()).collect();
    assert!(matches!(
        parse_classes("u", &long),
        Err(UsersError::TooManyClasses { .. })
    ));
    assert_eq!(
        KEYSPACE
            & tessera_plugin_abi::class::NAMES
                .iter()
                .fold(0, |a, (_, b)| a | b),
        0
    );
}

#[test]
fn a_command_needs_every_governed_class_it_has() {
    let reader = User {
        name: "r".into(),
        allowed_classes: Some(class::READ),
        key_prefix: None,
        databases: None,
    };
    assert!(reader.allows(class::READ | class::FAST));
    assert!(!reader.allows(class::WRITE));
    // KEYS: read, dangerous, keyspace.
    let keys = command_classes(class::READ | class::DANGEROUS, "KEYS");
    assert_eq!(keys & KEYSPACE, KEYSPACE);
    assert!(!reader.allows(keys));
    let wide = User {
        allowed_classes: Some(class::READ | class::DANGEROUS | KEYSPACE),
        ..reader.clone()
    };
    assert!(wide.allows(keys));
    // Ungoverned commands (PING: fast, keyless) run with no class at all.
    let none = User {
        allowed_classes: Some(0),
        ..reader
    };
    assert!(none.allows(class::FAST | class::KEYLESS | class::CONNECTION));
    assert!(!none.allows(class::SCRIPTING));
    assert_eq!(command_classes(class::READ, "GET"), class::READ);
}

#[test]
fn refuse_all_lets_no_one_in() {
    let users = Users::refuse_all(9);
    assert!(users.auth_required());
    assert!(users.authenticate(b"default", b"").is_none());
    assert_eq!(users.source(), Source::Refused);
    assert_eq!(users.version(), 9);
}

#[test]
fn views_and_debug_never_show_a_hash() {
    let users = Users::new(
        &[entry("bob", "pw"), entry("alice", "pw")],
        None,
        4,
        Source::Cluster,
    )
    .unwrap();
    let names: Vec<&str> = users.views().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert!(users.views()[0].password_set);
    let shown = format!(
        "{users:?} {:?} {}",
        entry("x", "pw"),
        serde_json::to_string(users.views()).unwrap()
    );
    assert!(!shown.contains("sha256$"), "{shown}");
}

#[test]
fn a_users_databases_are_checked_sorted_and_enforced() {
    let mut e = entry("app", "pw");
    e.databases = Some(vec![5, 2, 5]);
    let users = Users::new(&[e.clone()], None, 1, Source::Config).unwrap();
    let app = users.authenticate(b"app", b"pw").unwrap();
    assert_eq!(app.databases.as_deref(), Some(&[2, 5][..]));
    assert!(app.may_use_db(2) && app.may_use_db(5));
    assert!(!app.may_use_db(0) && !app.may_use_db(3));
    for bad in [vec![], vec![crate::databases::MAX_DATABASES]] {
        e.databases = Some(bad);
        assert!(matches!(
            Users::new(&[e.clone()], None, 1, Source::Config),
            Err(UsersError::BadDatabases { .. })
        ));
    }
}
