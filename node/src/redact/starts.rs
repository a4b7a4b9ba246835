//! The literals every match of each built-in rule starts with, worked out
//! ahead of time: the table below, one entry per rule of `rules::RULES`
//! in order (`None`: a match may start anywhere).
//!
//! Parsing the 35 patterns and extracting their prefixes took 1.2 ms of
//! every process that redacts anything (a `cairn search` that reads one
//! new line, `cairn remember`, an MCP server's first read), more than the
//! rest of building the rules' prefilters. The table holds exactly what
//! the regex engine's own prefix extraction gives for each pattern (the
//! same extraction `Prefilter::from_hir_prefix` runs, with the `regex`
//! crate's parser defaults); a test checks every entry against it, so a
//! changed rule fails the tests until the table is written again with
//! `CAIRN_WRITE_STARTS=1 cargo test -p cairn-node --lib redact::starts`
//! (then `cargo fmt`). Each entry names the pattern it was written for by
//! a hash, and a rule whose entry names another pattern (or has none)
//! works its literals out when the process starts, as before: a table
//! left behind by a changed rule costs time, never a missed secret.

/// A rule's entry: the [`pattern_hash`] of the pattern it was worked out
/// for (an entry for another pattern is not used: the rule's literals are
/// then worked out from its pattern when the process starts), and the
/// literals.
pub(super) type Entry = (u64, Option<&'static [&'static [u8]]>);

/// FNV-1a of `pattern`: what ties a table entry to the pattern it was
/// written for.
pub(super) fn pattern_hash(pattern: &str) -> u64 {
    pattern.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The literals every match of `rules::RULES[i]` starts with.
pub(super) const STARTS: &[Entry] = &[
    // -----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)---
    (0x3f1303dd48cad89c, Some(&[b"-----BEGIN"])),
    // -----END[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----
    (0xf8b4c9223f9f7732, Some(&[b"-----END"])),
    // ://[A-Za-z0-9._~%!$&*+=\\-]*:(?P<pw>[^\\s/?#@\"\'<>]+)@[A-Za-z0-
    (0x87c97d741b8781fb, Some(&[b"://"])),
    // https?://hooks\\.slack\\.com/(?:services|workflows|triggers)/(
    (0xede9d5344d43a464, Some(&[b"http"])),
    // sk-ant-[A-Za-z0-9_\\-]{20,}
    (0x01130a2213868dda, Some(&[b"sk-ant-"])),
    // sk-(?P<pre>(?:proj|svcacct|admin)-)?(?P<body>[A-Za-z0-9_\\-]{
    (0xb7948f342b45102e, Some(&[b"sk-"])),
    // gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}
    (
        0x334ddef6013b7f46,
        Some(&[b"gho_", b"ghp_", b"ghr_", b"ghs_", b"ghu_", b"github_pat_"]),
    ),
    // gl(?:pat|ptt|dt|rt)-[A-Za-z0-9_\\-]{20,}
    (0x5b5e45f419e7d878, Some(&[b"gl"])),
    // xox[abposr]-[A-Za-z0-9\\-]{10,}
    (0xa891291d39dc0848, Some(&[b"xox"])),
    // AIza[0-9A-Za-z_\\-]{35}
    (0x7cae534356a5d902, Some(&[b"AIza"])),
    // [sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{
    (
        0xca7c153c3aea6caa,
        Some(&[
            b"rk_live_",
            b"rk_test_",
            b"rk_prod_",
            b"sk_live_",
            b"sk_test_",
            b"sk_prod_",
            b"whsec_",
        ]),
    ),
    // npm_[A-Za-z0-9]{36}
    (0xc5f1b7b2bc06c21a, Some(&[b"npm_"])),
    // hf_[A-Za-z0-9]{30,}
    (0x3ab9b77b978cd1c9, Some(&[b"hf_"])),
    // A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}
    (0x9c68f8ec9bb5b8c6, Some(&[b"A"])),
    // \\[REDACTED:aws-access-key\\]
    (0xe67ac9142c9a5f55, Some(&[b"[REDACTED:aws-access-key]"])),
    // (?P<vault>hv[sb]\\.[A-Za-z0-9_-]{24,})|(?P<databricks>dapi[a-
    (
        0xc9a089a98f26619e,
        Some(&[
            b"hvb.", b"hvs.", b"dapi", b"AGE-", b"xapp", b"xoxe", b"glcb", b"glft", b"glim",
            b"glag", b"gloa", b"glso", b"glff", b"GR13", b"api_", b"GOCS", b"ya29", b"1//0",
            b".atl", b"doo_", b"dop_", b"dor_", b"shpa", b"shpc", b"shpp", b"shps", b"PMAK",
            b"pul-", b"sbp_", b"bkua", b"v1.0", b"lsv2", b"CCIP", b"dp.p", b"dp.s", b"dp.c",
            b"dp.a", b"glc_", b"sntr", b"HRKU", b"psca", b"tske", b"secr", b"pplx", b"xai-",
            b"LTAI", b"AKCp", b"pnu_", b"fio-",
        ]),
    ),
    // (?P<token>rubygems_[a-f0-9]{48}|sk-(?:or-v1-)?[a-f0-9]{32,64
    (
        0xa63a2ac7c026c5a5,
        Some(&[
            b"ruby", b"sk-o", b"sk-", b"xkey", b"ship", b"FLWS", b"pypi", b"SG.", b"lin_", b"glsa",
            b"fo1_", b"fm1a", b"fm1r", b"fm1_", b"fm2a", b"fm2r", b"fm2_", b"sq0a", b"sq0c",
            b"gsk_", b"ATAT", b"ATBB", b"CLOJ", b"dckr",
        ]),
    ),
    // (?P<token>ntn_[0-9]{11}[A-Za-z0-9]{35}|r8_[A-Za-z0-9]{37}|dt
    (
        0xe11fb0ac7ab5ab8e,
        Some(&[
            b"ntn_", b"r8_", b"dt0c", b"NRAK", b"ops_", b"A3-", b"sha2", b"rdme", b"EZAK", b"EZTK",
            b"duff", b"figd", b"nfp_", b"sk.e",
        ]),
    ),
    // (?P<twilio>SK[0-9a-fA-F]{32})
    (0x2bb63fd388fff532, Some(&[b"SK"])),
    // (?P<discord>[MNO][DTjz][A-Za-z0-9_-]{22,24}\\.[A-Za-z0-9_-]{6
    (
        0x0502018db834561c,
        Some(&[
            b"MD", b"MT", b"Mj", b"Mz", b"ND", b"NT", b"Nj", b"Nz", b"OD", b"OT", b"Oj", b"Oz",
        ]),
    ),
    // (?P<telegram>:AA[A-Za-z0-9_-]{33})
    (0x2abf20287f74f834, Some(&[b":AA"])),
    // (?P<azure>Q~[A-Za-z0-9_~.-]{31,34})
    (0x143916531b892442, Some(&[b"Q~"])),
    // eyJ[A-Za-z0-9_\\-]{8,}\\.[A-Za-z0-9_\\-]{8,}\\.[A-Za-z0-9_\\-]{8,
    (0xa6b56c64c68a26a7, Some(&[b"eyJ"])),
    // (?:(?:aws|Aws|AWS)[_ -]?(?:secret|Secret|SECRET)(?:[_ -]?(?:
    (
        0x78308cb7efc5f612,
        Some(&[
            b"aws ", b"aws-", b"aws_", b"awss", b"awsS", b"Aws ", b"Aws-", b"Aws_", b"Awss",
            b"AwsS", b"AWS ", b"AWS-", b"AWS_", b"AWSs", b"AWSS", b"secr", b"Secr", b"SECR",
        ]),
    ),
    // (?:authorization|Authorization|AUTHORIZATION)[\"\']?[ \\t]*[:=]
    (0xe301694f0ca035d2, Some(&[b"autho", b"Autho", b"AUTHO"])),
    // (?:bearer|Bearer|BEARER)[ \\t]+(?P<v>[A-Za-z0-9._~+/\\-]{16,}=
    (
        0x24acf0baa467e70b,
        Some(&[
            b"bearer\t",
            b"bearer ",
            b"Bearer\t",
            b"Bearer ",
            b"BEARER\t",
            b"BEARER ",
        ]),
    ),
    // [ \\t](?:-u|--user)[ \\t]*[\"\']?[^\\s:\"\'\\-][^\\s:\"\']*:(?P<v>[^\\s\"
    (
        0xbe55421b7b34682e,
        Some(&[
            b"\t-u\t", b"\t-u ", b"\t-u\"", b"\t-u\'", b"\t-u", b"\t--u", b" -u\t", b" -u ",
            b" -u\"", b" -u\'", b" -u", b" --u",
        ]),
    ),
    // --(?P<flag>(?i-u:password|passwd|pass|db-password|auth-token
    (0xacde53f3f4587a34, Some(&[b"--"])),
    // (?:mysql|MYSQL|MySQL|mariadb|MARIADB|MariaDB)[^\\n|;&]*?[ \\t]
    (
        0x7e38b90f569a6f72,
        Some(&[
            b"mysql", b"MYSQL", b"MySQL", b"mariadb", b"MARIADB", b"MariaDB",
        ]),
    ),
    // sshpass(?P<opts>(?:[ \\t]+[^\\s|;&]+)*?)[ \\t]+-p[ \\t]*(?P<v>\"[
    (0x0960dd1d441d4157, Some(&[b"sshpass"])),
    // login(?:[ \\t][^\\n|;&]*?)?[ \\t](?:-p|--password)(?:[ \\t]+|=)?
    (0xda59fb3be231c748, Some(&[b"login"])),
    // password[ \\t]+(?P<v>\"[^\"\\n]*\"|[^\\s\"]+)
    (0x8628fa8683b97a33, Some(&[b"password"])),
    // :(?:5432|5433|5434|5435|6432|\\*):[^:\\s\\\\\"\'/]+:[^:\\s\\\\\"\']+:(?
    (
        0x7fee30cbfb25a5d4,
        Some(&[
            b":5432:", b":5433:", b":5434:", b":5435:", b":6432:", b":*:",
        ]),
    ),
    // (?:password|Password|PASSWORD|passphrase|Passphrase|PASSPHRA
    (
        0xb40fc21df000f8e8,
        Some(&[
            b"passw", b"Passw", b"PASSW", b"passp", b"Passp", b"PASSP", b"passc", b"Passc",
        ]),
    ),
    // (?:key|Key|KEY|token|Token|TOKEN) (?:for[ \\t]+[^\\n.,;:!?\"\'`]
    (
        0x2ead0f2aa0e083c7,
        Some(&[b"key ", b"Key ", b"KEY ", b"toke", b"Toke", b"TOKE"]),
    ),
    // (?:key|Key|KEY|token|Token|TOKEN)
    (
        0x3e2dbc71ea07155b,
        Some(&[b"key", b"Key", b"KEY", b"token", b"Token", b"TOKEN"]),
    ),
    // (?P<key>(?:pass|Pass|PASS|pwd|Pwd|PWD|secret|Secret|SECRET|t
    (
        0x25523f4b39d7fb6e,
        Some(&[
            b"pass", b"Pass", b"PASS", b"pwd", b"Pwd", b"PWD", b"secr", b"Secr", b"SECR", b"toke",
            b"Toke", b"TOKE", b"key", b"Key", b"KEY", b"auth", b"Auth", b"AUTH", b"cred", b"Cred",
            b"CRED",
        ]),
    ),
];

#[cfg(test)]
mod tests {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};

    /// What the regex engine's prefix extraction gives for `pattern`:
    /// `Prefilter::from_hir_prefix`'s literals for leftmost-first search.
    fn extracted(pattern: &str) -> Option<Vec<Vec<u8>>> {
        let hir = regex_syntax::Parser::new().parse(pattern).expect("parse");
        let mut extractor = Extractor::new();
        extractor.kind(ExtractKind::Prefix);
        let mut seq = extractor.extract(&hir);
        seq.optimize_for_prefix_by_preference();
        seq.literals()
            .map(|lits| lits.iter().map(|l| l.as_bytes().to_vec()).collect())
    }

    /// The table's source for `rules`.
    fn source(rules: &[Option<Vec<Vec<u8>>>]) -> String {
        let text = include_str!("starts.rs");
        let head = &text[..text.find("pub(super) const STARTS").expect("table")];
        let tail = &text[text.find("#[cfg(test)]\nmod tests").expect("tests")..];
        let mut out = String::from(head);
        out.push_str("pub(super) const STARTS: &[Entry] = &[\n");
        for (def, lits) in super::super::rules::RULES.iter().zip(rules) {
            let shown: String = def.pattern.chars().take(60).collect();
            out.push_str(&format!("    // {}\n", shown.escape_debug()));
            let hash = super::pattern_hash(def.pattern);
            match lits {
                None => out.push_str(&format!("    ({hash:#018x}, None),\n")),
                Some(lits) => {
                    out.push_str(&format!("    ({hash:#018x}, Some(&["));
                    for l in lits {
                        out.push_str(&format!("b\"{}\", ", l.escape_ascii()));
                    }
                    out.push_str("])),\n");
                }
            }
        }
        out.push_str("];\n\n");
        out.push_str(tail);
        out
    }

    #[test]
    fn an_entry_written_for_another_pattern_is_not_used() {
        use super::super::{Action, Compiled, rules};
        let def = rules::RULES
            .iter()
            .find(|d| d.pattern.starts_with("gh[pousr]_"))
            .expect("the GitHub token rule");
        let text = "token ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8 here";
        // An entry for another pattern, naming literals this rule's
        // matches do not start with: the rule's own literals are used.
        let stale: super::Entry = (super::pattern_hash("gh_old"), Some(&[b"zzz"]));
        let rule = Compiled::lazy(def.pattern, Some(&stale), Action::Builtin(def.handler));
        assert_eq!(rule.first_start(text), Some(6));
        // No entry at all: the same.
        let rule = Compiled::lazy(def.pattern, None, Action::Builtin(def.handler));
        assert_eq!(rule.first_start(text), Some(6));
        // The entry written for it.
        let i = rules::RULES
            .iter()
            .position(|d| d.pattern == def.pattern)
            .expect("index");
        let rule = Compiled::lazy(
            def.pattern,
            super::STARTS.get(i),
            Action::Builtin(def.handler),
        );
        assert_eq!(rule.first_start(text), Some(6));
        assert_eq!(rule.first_start("no token"), None);
    }

    #[test]
    fn the_table_holds_what_the_regex_engine_extracts_from_each_rule() {
        let rules = super::super::rules::RULES;
        let want: Vec<Option<Vec<Vec<u8>>>> = rules.iter().map(|d| extracted(d.pattern)).collect();
        if std::env::var_os("CAIRN_WRITE_STARTS").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/redact/starts.rs");
            std::fs::write(path, source(&want)).expect("write the table");
            return;
        }
        assert_eq!(
            super::STARTS.len(),
            rules.len(),
            "one entry per rule: write the table again (see the module's docs)"
        );
        for (i, (def, want)) in rules.iter().zip(&want).enumerate() {
            let (hash, lits) = super::STARTS[i];
            let have: Option<Vec<Vec<u8>>> =
                lits.map(|lits| lits.iter().map(|l| l.to_vec()).collect());
            assert_eq!(
                (hash, &have),
                (super::pattern_hash(def.pattern), want),
                "rule {i} ({}): write the table again (see the module's docs)",
                def.pattern
            );
        }
    }
}
