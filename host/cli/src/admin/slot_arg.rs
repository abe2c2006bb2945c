//! Slots as `tessera admin` takes them: `N` or `A-B`, as `slots list`, the console and the
//! migrations summary write them. A range's bounds are checked here (0-1023, A ≤ B), so a
//! typo is refused before any call.

use tessera_model::router::SLOTS;

/// `"400-511"` → (400, 511); `"7"` → (7, 7).
///
/// # Errors
/// Not a slot or a range of slots, a slot past 1023, or a range that runs backwards.
pub(super) fn parse_range(s: &str) -> Result<(u16, u16), String> {
    let slot = |t: &str| -> Result<u16, String> {
        let n: u32 = t
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a slot or a range of slots (N or A-B)"))?;
        if n as usize >= SLOTS {
            return Err(format!(
                "slot {n} does not exist: slots are 0-{}",
                SLOTS - 1
            ));
        }
        Ok(n as u16)
    };
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (slot(a)?, slot(b)?),
        None => {
            let n = slot(s)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("slot range {a}-{b} runs backwards: write {b}-{a}"));
    }
    Ok((a, b))
}

/// A command's slots and group: `A-B GROUP`, `N GROUP` or (as before) `FROM TO GROUP`.
///
/// # Errors
/// Another number of words, or a word that is not what its place needs.
pub(super) fn range_and_group(words: &[String]) -> anyhow::Result<(u16, u16, u32)> {
    let group = |g: &str| {
        g.parse::<u32>()
            .map_err(|_| anyhow::anyhow!("{g:?} is not a group id"))
    };
    match words {
        [range, g] => {
            let (a, b) = parse_range(range).map_err(anyhow::Error::msg)?;
            Ok((a, b, group(g)?))
        }
        [from, to, g] => {
            let (a, _) = parse_range(from).map_err(anyhow::Error::msg)?;
            let (_, b) = parse_range(to).map_err(anyhow::Error::msg)?;
            if a > b {
                anyhow::bail!("slot range {a}-{b} runs backwards: write {b}-{a}");
            }
            Ok((a, b, group(g)?))
        }
        _ => anyhow::bail!("give the slots and the group: A-B GROUP (or FROM TO GROUP)"),
    }
}

/// Every slot of the words, each `N` or `A-B`, in order, without repeats.
///
/// # Errors
/// A word that is not a slot or a range.
pub(super) fn expand(words: &[String]) -> anyhow::Result<Vec<u16>> {
    let mut out = std::collections::BTreeSet::new();
    for w in words {
        let (a, b) = parse_range(w).map_err(anyhow::Error::msg)?;
        out.extend(a..=b);
    }
    Ok(out.into_iter().collect())
}

/// `7` or `400-511`.
pub(super) fn label(from: u16, to: u16) -> String {
    if from == to {
        from.to_string()
    } else {
        format!("{from}-{to}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn ranges_single_slots_and_the_old_three_words_all_parse() {
        assert_eq!(parse_range("400-511"), Ok((400, 511)));
        assert_eq!(parse_range("7"), Ok((7, 7)));
        assert_eq!(range_and_group(&words("400-511 2")).unwrap(), (400, 511, 2));
        assert_eq!(range_and_group(&words("400 511 2")).unwrap(), (400, 511, 2));
        assert_eq!(range_and_group(&words("9 3")).unwrap(), (9, 9, 3));
        assert_eq!(expand(&words("3 1-2 2")).unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn bad_ranges_say_what_is_wrong() {
        assert!(
            parse_range("511-400")
                .unwrap_err()
                .contains("runs backwards")
        );
        assert!(parse_range("0-1024").unwrap_err().contains("0-1023"));
        assert!(parse_range("x").unwrap_err().contains("not a slot"));
        let e = range_and_group(&words("400-511")).unwrap_err().to_string();
        assert!(e.contains("A-B GROUP"), "{e}");
        let e = range_and_group(&words("1-2 g")).unwrap_err().to_string();
        assert!(e.contains("not a group id"), "{e}");
    }
}
