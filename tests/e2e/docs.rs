//! `cairn completions SHELL` and `cairn man`, generated from the clap
//! definitions.

use crate::util::TestHome;

#[test]
fn completion_scripts_for_every_shell() {
    let home = TestHome::empty();
    let cases = [
        ("bash", "complete -F _cairn"),
        ("zsh", "#compdef cairn"),
        ("fish", "complete -c cairn"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[cairn]"),
    ];
    for (shell, marker) in cases {
        let out = home.ok(&["completions", shell]);
        assert!(out.contains(marker), "{shell}: {marker} missing");
        // Every command is offered, the new ones included.
        for cmd in [
            "search",
            "show",
            "pair",
            "serve",
            "ui",
            "completions",
            "man",
        ] {
            assert!(out.contains(cmd), "{shell} completes {cmd}");
        }
    }
    // Flags of a command complete too.
    let bash = home.ok(&["completions", "bash"]);
    assert!(bash.contains("--no-refresh") && bash.contains("--since"));
    // The bash script is valid bash, where bash exists.
    if std::path::Path::new("/bin/bash").exists() {
        let f = home.path().join("cairn.bash");
        std::fs::write(&f, &bash).expect("write script");
        let st = std::process::Command::new("/bin/bash")
            .arg("-n")
            .arg(&f)
            .status()
            .expect("bash -n");
        assert!(st.success(), "bash -n accepts the completion script");
    }
    let bad = home.run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_page_printed_or_written_per_command() {
    let home = TestHome::empty();
    let page = home.ok(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH cairn"),
        "roff"
    );
    assert!(page.contains(".TH cairn 1"));
    assert!(page.contains("search") && page.contains("completions"));
    let dir = home.path().join("man1");
    let out = home.ok(&["man", "--dir", dir.to_str().expect("utf-8 path")]);
    assert!(out.contains("man pages written"));
    for name in ["cairn.1", "cairn-search.1", "cairn-ui.1", "cairn-pair.1"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|_| panic!("{name}"));
        assert!(text.contains(".TH"), "{name} is a man page");
    }
    assert!(
        std::fs::read_to_string(dir.join("cairn-ui.1"))
            .expect("ui page")
            .contains("Loopback address")
    );
}
