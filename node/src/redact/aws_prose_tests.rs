//! Table tests with exact outputs for AWS secret access keys (beside
//! their key id whatever the separator, after AWS-named keys, flags and
//! phrases) and for API keys and tokens given in prose, with the
//! negatives that must come back untouched: AWS's documentation example
//! keys, git SHAs, UUIDs, base64 blobs and checksums.

use super::format_tests::{check_intact, check_rows};

const ID: &str = "AKIAUJZDE8GXD6NCF10E";
const SECRET: &str = "El2hpChYgCfrL1spNxnyVmihA+2O76UMFxFkM+R5";
const SLASHED: &str = "qiBxywr/UaeVaam/XU8Vy7/fBxR7sbyMsG7bqdLu";
const A: &str = "[REDACTED:aws-access-key]";
const S: &str = "[REDACTED:aws-secret-key]";
const G: &str = "[REDACTED:generic-secret]";

/// `template` with `{id}`, `{secret}`, `{slashed}`, `{A}`, `{S}`, `{G}` filled.
fn fill(template: &str) -> String {
    template
        .replace("{id}", ID)
        .replace("{secret}", SECRET)
        .replace("{slashed}", SLASHED)
        .replace("{A}", A)
        .replace("{S}", S)
        .replace("{G}", G)
}

fn check_templates(rows: &[(&str, &str)]) {
    let filled: Vec<(String, String)> = rows.iter().map(|(i, o)| (fill(i), fill(o))).collect();
    let borrowed: Vec<(&str, &str)> = filled
        .iter()
        .map(|(i, o)| (i.as_str(), o.as_str()))
        .collect();
    check_rows(&borrowed);
}

#[test]
fn aws_secret_beside_its_key_id_whatever_the_separator() {
    check_templates(&[
        ("{id} {secret}", "{A} {S}"),
        ("{id} / {secret}", "{A} / {S}"),
        ("{id}/{secret}", "{A}/{S}"),
        ("{id}/{slashed}", "{A}/{S}"),
        ("{id},{secret}", "{A},{S}"),
        ("{id}:{secret}", "{A}:{S}"),
        ("{id}\t{secret}", "{A}\t{S}"),
        ("{id}\n{secret}\n", "{A}\n{S}\n"),
        // Tab and line break JSON-escaped in a tool's arguments.
        (
            "{\"content\":\"{id}\\t{secret}\\n\"}",
            "{\"content\":\"{A}\\t{S}\\n\"}",
        ),
        (
            "{\"content\":\"{id}\\n{slashed}\"}",
            "{\"content\":\"{A}\\n{S}\"}",
        ),
        // A key id right after an escaped line break is its own word.
        (
            "{\"content\":\"Access key ID,Secret access key\\n{id},{secret}\\n\"}",
            "{\"content\":\"Access key ID,Secret access key\\n{A},{S}\\n\"}",
        ),
        // The console's CSV download, with its header line.
        (
            "Access key ID,Secret access key\n{id},{secret}\n",
            "Access key ID,Secret access key\n{A},{S}\n",
        ),
        (
            "User name,Password,Access key ID,Secret access key,Console login link\nci,,{id},{slashed},https://1234.signin.aws.amazon.com/console\n",
            "User name,Password,Access key ID,Secret access key,Console login link\nci,,{A},{S},https://1234.signin.aws.amazon.com/console\n",
        ),
        // Prose, either order.
        (
            "access key {id} secret key {secret}",
            "access key {A} secret key {S}",
        ),
        (
            "use {secret} with the key id {id} for CI",
            "use {S} with the key id {A} for CI",
        ),
        // Temporary credentials (ASIA) are paired too.
        ("ASIAD9IYBJYPLGM9N2LY {slashed}", "{A} {S}"),
        // Written into a path.
        ("/home/dev/{id} / {secret}/app", "/home/dev/{A} / {S}/app"),
        ("/srv/{id}/keys/{slashed}", "/srv/{A}/keys/{S}"),
        // Two pairs: each id takes its own secret.
        (
            "{id},{secret}\nAKIA9A47T80OGXEVQNBN,{slashed}\n",
            "{A},{S}\n{A},{S}\n",
        ),
    ]);
}

#[test]
fn aws_secret_after_aws_named_keys_flags_and_phrases() {
    check_templates(&[
        (
            "aws_secret_access_key={secret}",
            "aws_secret_access_key={S}",
        ),
        (
            "aws_secret_access_key = {secret}",
            "aws_secret_access_key = {S}",
        ),
        (
            "aws_secret_access_key: {slashed}",
            "aws_secret_access_key: {S}",
        ),
        (
            "export AWS_SECRET_ACCESS_KEY=\"{secret}\"",
            "export AWS_SECRET_ACCESS_KEY=\"{S}\"",
        ),
        (
            "{\"aws_secret_access_key\": \"{secret}\"}",
            "{\"aws_secret_access_key\": \"{S}\"}",
        ),
        (
            "{\\\"aws_secret_access_key\\\": \\\"{secret}\\\"}",
            "{\\\"aws_secret_access_key\\\": \\\"{S}\\\"}",
        ),
        (
            "aws configure set aws_secret_access_key {secret}",
            "aws configure set aws_secret_access_key {S}",
        ),
        (
            "aws configure set aws_secret_access_key {slashed} --profile ci",
            "aws configure set aws_secret_access_key {S} --profile ci",
        ),
        (
            "s3cmd --aws-secret-access-key {secret} ls",
            "s3cmd --aws-secret-access-key {S} ls",
        ),
        (
            "tool --aws-secret-access-key={secret}",
            "tool --aws-secret-access-key={S}",
        ),
        (
            "\"AccessKey\": {\"UserName\": \"ci\", \"SecretAccessKey\": \"{secret}\"}",
            "\"AccessKey\": {\"UserName\": \"ci\", \"SecretAccessKey\": \"{S}\"}",
        ),
        ("secretAccessKey: '{slashed}'", "secretAccessKey: '{S}'"),
        ("secret_key = \"{secret}\"", "secret_key = \"{S}\""),
        (
            "the secret access key {secret}",
            "the secret access key {S}",
        ),
        ("Secret key: {secret}.", "Secret key: {S}."),
        ("the AWS secret is {secret}", "the AWS secret is {S}"),
        ("AWS secret key = {slashed}", "AWS secret key = {S}"),
        ("the aws secret was {secret}", "the aws secret was {S}"),
        (
            "/home/dev/aws configure set aws_secret_access_key {secret}/app",
            "/home/dev/aws configure set aws_secret_access_key {S}/app",
        ),
    ]);
}

#[test]
fn aws_negatives_stay() {
    check_intact(&[
        // AWS's documentation examples: published placeholders that open
        // nothing, kept searchable (the id spells EXAMPLE, the secret
        // EXAMPLEKEY; AWS issues neither).
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "--aws-secret-access-key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAI44QH8DHBEXAMPLE je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        // Phrases without a secret after them.
        "the secret key is stored in ~/.aws/credentials",
        "rotate the AWS secret access key every 90 days",
        "secret key: see commit 8638af64f306401242221d9ac7d9621ba201fdd4",
        "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        "SecretAccessKey: !Ref SecretParam",
        // A 40-character run that is a slice of something longer.
        "the secret key QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5eg== is not one",
        "the secret key file is /etc/ssl/private/ci-runner-2026-build-host.key",
    ]);
}

#[test]
fn aws_key_id_beside_what_is_not_a_secret() {
    // The id goes; the SHA, UUID, blob, checksum and path beside it stay.
    check_templates(&[
        (
            "{id} commit 8638af64f306401242221d9ac7d9621ba201fdd4",
            "{A} commit 8638af64f306401242221d9ac7d9621ba201fdd4",
        ),
        (
            "{id} session 550e8400-e29b-41d4-a716-446655440000",
            "{A} session 550e8400-e29b-41d4-a716-446655440000",
        ),
        (
            "{id} sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
            "{A} sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
        ),
        (
            "{id} e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "{A} e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        (
            "{id} data:application/octet-stream;base64,QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9w",
            "{A} data:application/octet-stream;base64,QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9w",
        ),
        (
            "{id} ETag 33a64df551425fcc55e4d42a148795d9f25f8d00",
            "{A} ETag 33a64df551425fcc55e4d42a148795d9f25f8d00",
        ),
        (
            "{id} in terraform/modules/networking/VpcPeering1",
            "{A} in terraform/modules/networking/VpcPeering1",
        ),
    ]);
}

#[test]
fn api_keys_and_tokens_in_prose() {
    check_templates(&[
        (
            "the API key is OV4qBkdfQ1y3GQsMpSscDlkr",
            "the API key is {G}",
        ),
        (
            "The API key is OV4qBkdfQ1y3GQsMpSscDlkr.",
            "The API key is {G}.",
        ),
        (
            "the access token is `HfbUqiprsU84sHnWiP3YaZB1`",
            "the access token is `{G}`",
        ),
        (
            "my GitHub token was set to Xzyn4eJAQIc9pDoALGnvobIb",
            "my GitHub token was set to {G}",
        ),
        (
            "the secret token for the staging bucket is NjIaawL1z2XoO1pMn2x3Yak3, keep it",
            "the secret token for the staging bucket is {G}, keep it",
        ),
        (
            "ok, the api key is now: \"ooj6XlxUDk1TOxCakeuf6AaB\"",
            "ok, the api key is now: \"{G}\"",
        ),
        ("the token is h0u1rxSmN0to9BovsIH6D191", "the token is {G}"),
        ("the key is A7Ut7bWOjVPkCnQ87qdfa0X3", "the key is {G}"),
        (
            "the token is now 8f14e45fceea167a5a36dedd4bea2543",
            "the token is now {G}",
        ),
        // The other way round.
        ("OV4qBkdfQ1y3GQsMpSscDlkr is the key", "{G} is the key"),
        (
            "\"HfbUqiprsU84sHnWiP3YaZB1\" is my API token",
            "\"{G}\" is my API token",
        ),
        (
            "use `Xzyn4eJAQIc9pDoALGnvobIb` is the new API key",
            "use `{G}` is the new API key",
        ),
        (
            "NjIaawL1z2XoO1pMn2x3Yak3 is our access token.",
            "{G} is our access token.",
        ),
        (
            "{\"path\":\"secret/ci\",\"value\":\"Xzyn4eJAQIc9pDoALGnvobIb is the key\"}",
            "{\"path\":\"secret/ci\",\"value\":\"{G} is the key\"}",
        ),
    ]);
}

#[test]
fn prose_about_keys_and_tokens_stays() {
    check_intact(&[
        "the API key is stored in vault",
        "the API key is required",
        "The access token is invalid",
        "the token is expired",
        "the key is user_id",
        "the primary key is id",
        "the key is 42",
        "the cache key is linux-cargo-9807af0e638c12e753aa1b4e601791bf2a8f71274023c8bbeec12fc149950857",
        "the public key is ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ8q3mS0vH7yQkYp1s9JcX2bV4nT6wL8eR5uA0dF3hK",
        "the key is 8638af64f306401242221d9ac7d9621ba201fdd4",
        "the key is 550e8400-e29b-41d4-a716-446655440000",
        "the idempotency key is 9f8a7c6b5d4e3f2a1b0c9d8e7f6a5b4c",
        "this is the key to the whole design",
        "That is the keyboard shortcut",
        "the API key is $OPENAI_API_KEY",
        "the API key is <your-api-key>",
        "max tokens is 4096",
        "the sort key is created_at",
        "Ctrl is the key you want",
    ]);
}

#[test]
fn secrets_named_as_files_in_a_path_of_words() {
    check_rows(&[
        (
            "cat /home/dev/app/AGE-SECRET-KEY-1N9LRDMPPFNFRMSWLPX05QU4WRM0QXHFAKGKWJ9SGGTXRFPAKCL6YU34C8D.txt",
            "cat /home/dev/app/[REDACTED:age-secret-key].txt",
        ),
        (
            "ls /srv/db.internal:5432:shop:app:Hj2pgpassWd55",
            "ls /srv/db.internal:5432:shop:app:[REDACTED:password]",
        ),
        (
            "/tmp/machine api.example.com login ci password Qz4netrcLine9",
            "/tmp/machine api.example.com login ci password [REDACTED:password]",
        ),
    ]);
    // Inside a base64 run the same bytes are not a token of their own.
    check_intact(&[
        "data:application/octet-stream;base64,AAAAQ29tcGxldGVseVJhbmRvbUJ5dGVz9x/AGE-SECRET-KEY-1N9LRDMPPFNFRMSWLPX05QU4WRM0QXHFAKGKWJ9SGGTXRFPAKCL6YU34C8D",
    ]);
}
