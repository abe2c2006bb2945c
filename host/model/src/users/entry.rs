//! A users table as proxy.toml and the store hold it (entries, the store document and the
//! views the APIs show are `tessera_wire::users` shapes), and the checks of names, classes,
//! prefixes, passwords.

use super::{CLASSES, MAX_KEY_PREFIX_LEN, MAX_NAME_LEN, MAX_PASSWORD_LEN, UsersError};

pub use tessera_wire::users::{UserEntry, UserView, UsersDoc};

/// Checks a user name: 1 to [`MAX_NAME_LEN`] printable ASCII characters, no spaces (Redis
/// refuses spaces; control characters and non-ASCII would garble logs and RESP replies).
///
/// # Errors
/// [`UsersError::BadName`].
pub fn check_name(name: &str) -> Result<(), UsersError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(UsersError::BadName(
            name.chars().take(MAX_NAME_LEN).collect(),
        ))
    }
}

/// The class bits of `names` (case-insensitive), normalized to lower case.
///
/// # Errors
/// An unknown name, or an absurdly long list.
pub fn parse_classes(user: &str, names: &[String]) -> Result<(u32, Vec<String>), UsersError> {
    if names.len() > CLASSES.len() * 2 {
        return Err(UsersError::TooManyClasses {
            user: user.into(),
            count: names.len(),
        });
    }
    let mut bits = 0;
    let mut normalized = Vec::with_capacity(names.len());
    for n in names {
        let Some(&(canonical, bit)) = CLASSES.iter().find(|(c, _)| c.eq_ignore_ascii_case(n))
        else {
            return Err(UsersError::UnknownClass {
                user: user.into(),
                class: n.chars().take(32).collect(),
            });
        };
        bits |= bit;
        if !normalized.iter().any(|c| c == canonical) {
            normalized.push(canonical.to_owned());
        }
    }
    Ok((bits, normalized))
}

/// Checks a key prefix: 1 to [`MAX_KEY_PREFIX_LEN`] bytes, no control characters.
///
/// # Errors
/// [`UsersError::BadKeyPrefix`].
pub fn check_key_prefix(user: &str, prefix: &str) -> Result<(), UsersError> {
    if prefix.is_empty()
        || prefix.len() > MAX_KEY_PREFIX_LEN
        || prefix.chars().any(char::is_control)
    {
        return Err(UsersError::BadKeyPrefix { user: user.into() });
    }
    Ok(())
}

/// Checks a user's databases: 1 to `MAX_DATABASES` numbers below it; sorted, without
/// repeats.
///
/// # Errors
/// [`UsersError::BadDatabases`].
pub fn check_databases(user: &str, dbs: &[u32]) -> Result<Vec<u32>, UsersError> {
    let max = crate::databases::MAX_DATABASES;
    if dbs.is_empty() || dbs.len() > max as usize || dbs.iter().any(|&d| d >= max) {
        return Err(UsersError::BadDatabases { user: user.into() });
    }
    let mut d = dbs.to_vec();
    d.sort_unstable();
    d.dedup();
    Ok(d)
}

/// Checks a clear password before it is hashed.
///
/// # Errors
/// [`UsersError::BadPassword`] for an empty or overlong one.
pub fn check_password(password: &str) -> Result<(), UsersError> {
    if password.is_empty() || password.len() > MAX_PASSWORD_LEN {
        return Err(UsersError::BadPassword);
    }
    Ok(())
}
