//! British and American spellings of one English word ("recognised" and
//! "recognized", "colour" and "color", "licence" and "license",
//! "cancelled" and "canceled"), so a question in one finds a session
//! written in the other. Rules for the regular endings (-ise/-ize,
//! -yse/-yze), short lists for the rest. Pure: it says what the other
//! spelling would be; it does not know whether a history holds it (a
//! made-up form, "wize", simply matches nothing).

/// Stems spelled -our in British English and -or in American ("colour",
/// "coloured", "colourful").
const OUR: &[&str] = &[
    "armour",
    "behaviour",
    "clamour",
    "colour",
    "endeavour",
    "favour",
    "flavour",
    "harbour",
    "honour",
    "humour",
    "labour",
    "neighbour",
    "odour",
    "parlour",
    "rigour",
    "rumour",
    "savour",
    "splendour",
    "tumour",
    "valour",
    "vapour",
    "vigour",
];

/// Words ending -re in British English and -er in American, without
/// that ending ("cent" for "centre", "centred", "centres").
const RE: &[&str] = &[
    "calib", "cent", "centimet", "fib", "kilomet", "lit", "lust", "meag", "met", "millimet", "sab",
    "somb", "spect", "theat",
];

/// Verbs whose final l British English doubles before -ed, -ing, -er
/// ("cancelled", "labelling", "modeller").
const DOUBLED_L: &[&str] = &[
    "bevel", "cancel", "channel", "chisel", "counsel", "dial", "duel", "fuel", "funnel", "label",
    "level", "marshal", "marvel", "model", "panel", "parcel", "pedal", "quarrel", "rival",
    "shovel", "signal", "snorkel", "total", "travel", "tunnel", "unravel",
];

/// Whole words spelled differently, British first.
const WORDS: &[(&str, &str)] = &[
    ("ageing", "aging"),
    ("aluminium", "aluminum"),
    ("analogue", "analog"),
    ("artefact", "artifact"),
    ("artefacts", "artifacts"),
    ("catalogue", "catalog"),
    ("catalogued", "cataloged"),
    ("catalogues", "catalogs"),
    ("defence", "defense"),
    ("dialogue", "dialog"),
    ("dialogues", "dialogs"),
    ("enrol", "enroll"),
    ("enrolment", "enrollment"),
    ("fulfil", "fulfill"),
    ("fulfilment", "fulfillment"),
    ("grey", "gray"),
    ("instalment", "installment"),
    ("judgement", "judgment"),
    ("licence", "license"),
    ("licences", "licenses"),
    ("licenced", "licensed"),
    ("manoeuvre", "maneuver"),
    ("mould", "mold"),
    ("offence", "offense"),
    ("plough", "plow"),
    ("practise", "practice"),
    ("practised", "practiced"),
    ("practises", "practices"),
    ("practising", "practicing"),
    ("programme", "program"),
    ("programmes", "programs"),
    ("sceptical", "skeptical"),
    ("skilful", "skillful"),
];

/// The word's other spelling, lowercase, if it has one: the American for
/// a British spelling and the British for an American one.
pub fn other_spelling(word: &str) -> Option<String> {
    let w = word.to_lowercase();
    if !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    if let Some(&(gb, us)) = WORDS.iter().find(|(gb, us)| *gb == w || *us == w) {
        return Some(if gb == w { us } else { gb }.to_owned());
    }
    ize(&w)
        .or_else(|| our(&w))
        .or_else(|| re(&w))
        .or_else(|| doubled_l(&w))
}

/// "-ise" and "-yse" forms and their "-ize", "-yze" twins, after a stem of
/// at least three letters (so "rise", "wise", "raise" and "size" are left
/// alone).
fn ize(w: &str) -> Option<String> {
    const ENDS: &[&str] = &["e", "ed", "es", "ing", "ation", "ations", "er", "ers"];
    for end in ENDS {
        let Some(body) = w.strip_suffix(end) else {
            continue;
        };
        for (from, to) in [("is", "iz"), ("iz", "is"), ("ys", "yz"), ("yz", "ys")] {
            if let Some(stem) = body.strip_suffix(from)
                && stem.len() >= 3
            {
                return Some(format!("{stem}{to}{end}"));
            }
        }
    }
    None
}

fn our(w: &str) -> Option<String> {
    const ENDS: &[&str] = &[
        "", "s", "ed", "ing", "ite", "ites", "able", "ful", "less", "al",
    ];
    // Also inside a longer word: "watercolour", "unfavourable".
    for end in ENDS {
        let Some(body) = w.strip_suffix(end) else {
            continue;
        };
        for stem in OUR {
            let common = &stem[..stem.len() - 2];
            if let Some(before) = body.strip_suffix(stem) {
                return Some(format!("{before}{common}r{end}"));
            }
            if let Some(before) = body.strip_suffix('r').and_then(|b| b.strip_suffix(common)) {
                return Some(format!("{before}{stem}{end}"));
            }
        }
    }
    None
}

/// The two ends `pairs` lists (British, American) swapped after one of
/// `stems`.
fn swap_end(w: &str, stems: &[&str], pairs: &[(&str, &str)]) -> Option<String> {
    for (gb, us) in pairs {
        for (from, to) in [(gb, us), (us, gb)] {
            if let Some(stem) = w.strip_suffix(from)
                && stems.contains(&stem)
            {
                return Some(format!("{stem}{to}"));
            }
        }
    }
    None
}

fn re(w: &str) -> Option<String> {
    let pairs = [
        ("re", "er"),
        ("res", "ers"),
        ("red", "ered"),
        ("ring", "ering"),
    ];
    swap_end(w, RE, &pairs)
}

fn doubled_l(w: &str) -> Option<String> {
    let pairs = [
        ("led", "ed"),
        ("ling", "ing"),
        ("ler", "er"),
        ("lers", "ers"),
    ];
    // The stems end in "l": "cancel" + "led" is "cancelled".
    swap_end(w, DOUBLED_L, &pairs)
}

#[cfg(test)]
mod tests {
    use super::other_spelling as other;

    #[test]
    fn each_spelling_finds_the_other() {
        for (gb, us) in [
            ("recognised", "recognized"),
            ("finalising", "finalizing"),
            ("organisation", "organization"),
            ("serialiser", "serializer"),
            ("analyse", "analyze"),
            ("paralysed", "paralyzed"),
            ("colour", "color"),
            ("behaviours", "behaviors"),
            ("favourite", "favorite"),
            ("watercolours", "watercolors"),
            ("unfavourable", "unfavorable"),
            ("practising", "practicing"),
            ("centre", "center"),
            ("centred", "centered"),
            ("kilometres", "kilometers"),
            ("cancelled", "canceled"),
            ("labelling", "labeling"),
            ("modellers", "modelers"),
            ("licence", "license"),
            ("catalogue", "catalog"),
            ("grey", "gray"),
            ("judgement", "judgment"),
        ] {
            assert_eq!(other(gb).as_deref(), Some(us), "{gb}");
            assert_eq!(other(us).as_deref(), Some(gb), "{us}");
        }
        assert_eq!(other("Recognised").as_deref(), Some("recognized"));
    }

    #[test]
    fn words_with_no_other_spelling_have_none() {
        for w in [
            "rise",
            "wise",
            "raise",
            "noise",
            "size",
            "seize",
            "prize",
            "four",
            "hour",
            "your",
            "tour",
            "flour",
            "there",
            "where",
            "more",
            "store",
            "called",
            "filled",
            "install",
            "error",
            "colourless2",
            "naïve",
            "über",
            "",
        ] {
            assert_eq!(other(w), None, "{w}");
        }
    }
}
