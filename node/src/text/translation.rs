//! The built-in translations: for a word of another language, or two
//! neighbouring CJK characters, the English word it stands for in
//! translated software messages (`tools/embed/translations.py` writes
//! `node/assets/embed/translations.txt`, compiled in).
//!
//! Two readers use them: a question asked in German, Russian or Chinese
//! looks up the English words of its own words (`search::lexical`), and
//! a record written in Chinese, Japanese or Korean enters the full-text
//! index with the English words of its character pairs after its text
//! ([`english_of_cjk`], through `index_form`), so an English question
//! finds it. This module owns the list and its look-up; it neither reads
//! the store nor decides when a question is translated.

use super::{is_cjk, is_hiragana};

/// The translations: a header, then `word english` lines sorted by word
/// (byte order).
static TRANSLATIONS: &str = include_str!("../../assets/embed/translations.txt");

/// English words added to one record's index form at most: a long
/// Chinese page adds its first distinct ones, not a dictionary.
const MOST_PER_RECORD: usize = 64;

/// The English words `key` (a word of another language, or two CJK
/// characters) translates to, strongest first; none for an English word
/// or one the messages never translated. A Russian word the messages
/// never used in this form takes the translation of the forms that share
/// its stem ([`same_stem`]): "отключили" (disabled, past) as "отключить".
pub fn translations_of(key: &str) -> impl Iterator<Item = &'static str> {
    sorted_lookup(TRANSLATIONS, key)
        .or_else(|| same_stem(key))
        .into_iter()
        .flat_map(str::split_whitespace)
}

/// Fewest letters of a Russian stem [`same_stem`] goes by: shorter ones
/// ("дел", "при") join unrelated words.
const LEAST_STEM: usize = 4;

/// For a lowercase Russian word without a line: the English word most of
/// the listed forms with the same Snowball stem translate to (the first
/// of them on a tie), or `None`. Russian inflects by endings, and the
/// catalogues the list was made from use a few forms of each word.
fn same_stem(word: &str) -> Option<&'static str> {
    if word.is_empty() || !word.chars().all(|c| matches!(c, 'а'..='я' | 'ё')) {
        return None;
    }
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::Russian);
    let stem = stemmer.stem(word);
    if stem.chars().count() < LEAST_STEM || !word.starts_with(stem.as_ref()) {
        return None;
    }
    let body = list_body(TRANSLATIONS);
    let mut votes: Vec<(&'static str, usize)> = Vec::new();
    for line in body[first_at_or_after(body, &stem)..].lines() {
        let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
        if !head.starts_with(stem.as_ref()) {
            break;
        }
        if stemmer.stem(head) == stem {
            match votes.iter_mut().find(|(e, _)| *e == rest) {
                Some(v) => v.1 += 1,
                None => votes.push((rest, 1)),
            }
        }
    }
    // The first of the most voted: `max_by_key` keeps the last of equals.
    let most = votes.iter().map(|v| v.1).max()?;
    votes.into_iter().find(|v| v.1 == most).map(|v| v.0)
}

/// The distinct English words of the CJK character pairs in `text`, in
/// the order first met, space-separated (empty when none has a line):
/// what an English reader would search such a record by. Pairs are taken
/// within each run of CJK characters, as a question's are, leaving out
/// those with a hiragana character.
pub fn english_of_cjk(text: &str) -> String {
    let mut words: Vec<&'static str> = Vec::new();
    let mut prev: Option<char> = None;
    let mut pair = String::with_capacity(8);
    for c in text.chars() {
        if !is_cjk(c) {
            prev = None;
            continue;
        }
        // Hiragana writes Japanese particles and endings, so a pair that
        // holds one mostly spans two words ("の本", "of" + "book", is
        // listed as "body"): such pairs add nothing.
        if let (Some(p), false) = (prev, is_hiragana(c) || prev.is_some_and(is_hiragana)) {
            pair.clear();
            pair.push(p);
            pair.push(c);
            for e in translations_of(&pair) {
                if !words.contains(&e) {
                    words.push(e);
                }
            }
            if words.len() >= MOST_PER_RECORD {
                break;
            }
        }
        prev = Some(c);
    }
    words.join(" ")
}

/// The rest of `word`'s line in `list` (lines `word rest…` after a
/// header line, sorted by word in byte order), by binary search over the
/// bytes; `None` when the list has no such line.
pub fn sorted_lookup<'l>(list: &'l str, word: &str) -> Option<&'l str> {
    let body = list_body(list);
    let line = body[first_at_or_after(body, word)..].lines().next()?;
    let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
    (head == word).then_some(rest)
}

/// A list without its header line.
fn list_body(list: &str) -> &str {
    list.split_once('\n').map_or("", |(_, b)| b)
}

/// Where the first line of `body` (lines sorted by their first word in
/// byte order) whose word is not smaller than `word` starts; the end of
/// `body` when there is none.
fn first_at_or_after(body: &str, word: &str) -> usize {
    let bytes = body.as_bytes();
    let (mut lo, mut hi) = (0usize, bytes.len());
    // Invariant: lines starting before `lo` hold smaller words, lines
    // starting at or after `hi` words not smaller; `lo` is a line's start.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let start = bytes[..mid]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
            .max(lo);
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| start + i);
        let line = &body[start..end];
        let head = line.split_once(' ').map_or(line, |(h, _)| h);
        match head < word {
            true => lo = (end + 1).min(bytes.len()),
            false => hi = start,
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_of_other_languages_translate_to_english_and_english_does_not() {
        let has = |key: &str, want: &str| translations_of(key).any(|e| e == want);
        assert!(has("fehler", "error"), "German");
        assert!(has("ошибка", "error"), "Russian");
        assert!(has("базы", "database"), "Russian, inflected");
        assert!(has("内存", "memory"), "Chinese, two characters");
        assert!(has("导入", "import"), "Chinese");
        // English words, stop words of other languages and unknown words
        // have no line.
        for w in [
            "error",
            "database",
            "import",
            "die",
            "und",
            "для",
            "warum",
            "zzzz",
            "",
            "llama",
            "vue",
            "installer",
            "под",
            "andere",
        ] {
            assert_eq!(translations_of(w).count(), 0, "{w}");
        }
        // Sorted by byte (the binary search's order), each word once, one
        // plain English word each.
        let mut last = "";
        let mut lines = 0;
        for line in TRANSLATIONS.lines().skip(1) {
            let mut words = line.split(' ');
            let key = words.next().expect("a word");
            assert!(key > last, "sorted: {last} then {key}");
            last = key;
            let english: Vec<&str> = words.collect();
            assert_eq!(english.len(), 1, "{line}");
            for e in english {
                assert!(
                    e.len() >= 3 && e.bytes().all(|b| b.is_ascii_lowercase()),
                    "{line}"
                );
                assert_ne!(e, key, "{line}");
            }
            lines += 1;
        }
        assert!(lines > 10_000, "{lines}");
        assert!(TRANSLATIONS.starts_with("# cairn translations v1 "));
    }

    #[test]
    fn a_russian_form_the_list_lacks_takes_its_stem_s_translation() {
        let of = |w: &str| translations_of(w).collect::<Vec<_>>();
        // Past tense, not in the list; its infinitive and participles are.
        assert!(sorted_lookup(TRANSLATIONS, "отключили").is_none());
        assert_eq!(of("отключили"), ["disable"]);
        // A form the list holds keeps its own line.
        assert_eq!(of("базы"), ["database"]);
        // Stems too short to trust, words of no listed stem, other
        // scripts and mixed words get nothing.
        for w in ["под", "для", "заказов", "zzzz", "отключили1", ""] {
            assert!(of(w).is_empty(), "{w}: {:?}", of(w));
        }
    }

    #[test]
    fn a_cjk_record_gets_the_english_words_of_its_character_pairs() {
        // "The Redis cache's order status was not invalidated in time;
        // we disabled the order cache." Pairs with a line: 缓存 cache,
        // 状态 status, 禁用 disable (each once, in the order met).
        let text = "因为 Redis 缓存里的订单状态没有及时失效。我们禁用订单缓存。";
        let words: Vec<String> = english_of_cjk(text).split(' ').map(str::to_owned).collect();
        for want in ["cache", "status", "disable"] {
            assert_eq!(
                words.iter().filter(|w| *w == want).count(),
                1,
                "{want} once in {words:?}"
            );
        }
        let at = |w: &str| words.iter().position(|x| x == w).expect("present");
        assert!(at("cache") < at("status") && at("status") < at("disable"));
        // A pair never spans two runs: "缓 存" split by a space, or by
        // Latin text, is not 缓存.
        assert!(!english_of_cjk("缓 存").contains("cache"));
        assert!(!english_of_cjk("缓x存").contains("cache"));
        // Katakana and kanji pairs count, pairs with hiragana do not:
        // "タイムアウト" is a timeout, "の本" ("of" + "book") is no body.
        assert!(english_of_cjk("タイムアウトしました").contains("timeout"));
        assert!(translations_of("の本").any(|e| e == "body"));
        assert_eq!(english_of_cjk("の本"), "");
        // Text without CJK, or a lone character, adds nothing.
        assert_eq!(english_of_cjk("the cache was stale"), "");
        assert_eq!(english_of_cjk("缓"), "");
        assert_eq!(english_of_cjk(""), "");
    }

    #[test]
    fn a_long_cjk_page_adds_a_bounded_number_of_words() {
        // Every pair of the list's CJK keys, repeated: far more distinct
        // translations than one record may add.
        let page: String = TRANSLATIONS
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(' ').map(|(k, _)| k))
            .filter(|k| k.chars().count() == 2 && k.chars().all(is_cjk))
            .collect::<Vec<_>>()
            .join("。");
        let words = english_of_cjk(&page);
        let n = words.split(' ').count();
        assert!(n <= MOST_PER_RECORD + 1, "{n}");
        assert!(n >= MOST_PER_RECORD / 2, "{n}");
    }

    #[test]
    fn a_word_is_found_by_binary_search_wherever_its_line_lies() {
        let list = "# head\nalpha b c\nbeta d\ngamma e f g\n";
        assert_eq!(sorted_lookup(list, "alpha"), Some("b c"));
        assert_eq!(sorted_lookup(list, "beta"), Some("d"));
        assert_eq!(sorted_lookup(list, "gamma"), Some("e f g"));
        for absent in ["a", "alp", "alphas", "bet", "delta", "zeta", ""] {
            assert_eq!(sorted_lookup(list, absent), None, "{absent}");
        }
        assert_eq!(sorted_lookup("# head only", "alpha"), None);
        // Every line of the real list is found.
        for line in TRANSLATIONS.lines().skip(1) {
            let (word, rest) = line.split_once(' ').expect("word and english");
            assert_eq!(sorted_lookup(TRANSLATIONS, word), Some(rest), "{word}");
        }
    }
}
