//! Secrets in a real keychain: gnome-keyring on a private D-Bus session bus, inspected from
//! outside CAR with `secret-tool` (libsecret-tools); plus the kernel keyutils store, the opt-in
//! plaintext file, and the error when no keychain is reachable.
//!
//! No `car` command stores secrets yet, so these tests drive `car::secrets` through the
//! `secrets` example binary (`examples/secrets.rs`), one process per operation.
//!
//! The [`Keyring`] fixture is meant for any test that needs a real Secret Service: start one,
//! `apply` it to the `car` (or `car-mcp`) command, and look at the store with `items`/`search`.
//! It needs `dbus-daemon`, `gnome-keyring-daemon` and `secret-tool` (Debian: `dbus`,
//! `gnome-keyring`, `libsecret-tools`); scripts/test.sh installs them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{example_bin, TestHome};

/// A private Secret Service: a `dbus-daemon` session bus of its own (no service activation, so
/// nothing else answers on it) and an unlocked `gnome-keyring-daemon` on it, with a throwaway
/// `HOME`, `XDG_DATA_HOME` and `XDG_RUNTIME_DIR`. Both daemons are killed on drop.
pub(crate) struct Keyring {
    env: Vec<(String, String)>,
    bus: Child,
    daemon: Child,
    _dir: tempfile::TempDir,
}

/// One item of the store, as `secret-tool search --all` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub label: String,
    pub secret: String,
    pub attributes: BTreeMap<String, String>,
}

impl Item {
    /// The item CAR stores for `account` holding `secret`.
    pub fn car(account: &str, secret: &str) -> Item {
        Item {
            label: format!("CAR secret {account}"),
            secret: secret.to_string(),
            attributes: BTreeMap::from([
                ("service".to_string(), "car".to_string()),
                ("username".to_string(), account.to_string()),
            ]),
        }
    }
}

const MISSING: &str = "the keychain tests need dbus-daemon, gnome-keyring-daemon and secret-tool: \
                       run scripts/test.sh (it installs them) or `apt-get install dbus \
                       gnome-keyring libsecret-tools`";

impl Keyring {
    /// Starts the bus and the keyring daemon and waits until the Secret Service answers.
    pub fn start() -> Keyring {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["home", "data", "config", "run"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
        let socket = root.join("run").join("bus");
        let config = root.join("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"
 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context=\"default\">
    <allow send_destination=\"*\" eavesdrop=\"true\"/>
    <allow eavesdrop=\"true\"/>
    <allow own=\"*\"/>
  </policy>
</busconfig>
",
                socket.display()
            ),
        )
        .unwrap();
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start dbus-daemon ({e}); {MISSING}"));
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_string();
        assert!(!address.is_empty(), "dbus-daemon printed no address");

        let env: Vec<(String, String)> = [
            ("DBUS_SESSION_BUS_ADDRESS", address),
            ("HOME", root.join("home").display().to_string()),
            ("XDG_DATA_HOME", root.join("data").display().to_string()),
            ("XDG_CONFIG_HOME", root.join("config").display().to_string()),
            ("XDG_RUNTIME_DIR", root.join("run").display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();

        let mut command = Command::new("gnome-keyring-daemon");
        command
            .args(["--foreground", "--unlock", "--components=secrets"])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut daemon = match command.spawn() {
            Ok(daemon) => daemon,
            Err(e) => {
                let _ = bus.kill();
                let _ = bus.wait();
                panic!("cannot start gnome-keyring-daemon ({e}); {MISSING}");
            }
        };
        // The password of the login keyring it creates and unlocks; EOF ends it.
        daemon
            .stdin
            .take()
            .unwrap()
            .write_all(b"car-test-password")
            .unwrap();
        let keyring = Keyring {
            env,
            bus,
            daemon,
            _dir: dir,
        };
        keyring.wait_until_ready();
        keyring
    }

    /// Puts the keyring's environment on `cmd` (and removes `CAR_SECRET_STORE`, so CAR picks
    /// the OS keychain, i.e. this Secret Service).
    pub fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env_remove("CAR_SECRET_STORE")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
    }

    /// The raw output (stdout and stderr interleaved) of `secret-tool search --all` with the
    /// given attributes, e.g. `&[("service", "car")]`.
    pub fn search(&self, attributes: &[(&str, &str)]) -> String {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exec secret-tool search --all \"$@\" 2>&1", "sh"]);
        for (k, v) in attributes {
            cmd.args([k, v]);
        }
        let out = self.apply(&mut cmd).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every item stored under service `car`, sorted by label.
    pub fn items(&self) -> Vec<Item> {
        let mut items = Vec::new();
        let mut current: Option<Item> = None;
        for line in self.search(&[("service", "car")]).lines() {
            if line.starts_with("[/") {
                items.extend(current.take());
                current = Some(Item {
                    label: String::new(),
                    secret: String::new(),
                    attributes: BTreeMap::new(),
                });
                continue;
            }
            let (Some(item), Some((key, value))) = (current.as_mut(), line.split_once(" = "))
            else {
                continue;
            };
            match key {
                "label" => item.label = value.to_string(),
                "secret" => item.secret = value.to_string(),
                _ => {
                    if let Some(name) = key.strip_prefix("attribute.") {
                        item.attributes.insert(name.to_string(), value.to_string());
                    }
                }
            }
        }
        items.extend(current);
        items.sort_by(|a, b| a.label.cmp(&b.label));
        items
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut cmd = Command::new("dbus-send");
            cmd.args([
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                "string:org.freedesktop.secrets",
            ]);
            let out = self.apply(&mut cmd).output().unwrap();
            if String::from_utf8_lossy(&out.stdout).contains("boolean true") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gnome-keyring-daemon did not register org.freedesktop.secrets within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        for child in [&mut self.daemon, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `secrets` example in `home`, with `RUST_LOG=trace` so a logged value would show.
fn secrets_cmd(home: &TestHome, args: &[&str]) -> Command {
    let mut cmd = home.command(example_bin("secrets").to_str().unwrap());
    cmd.args(args).env("RUST_LOG", "trace");
    cmd
}

/// Runs a prepared `secrets` command with `stdin` and returns its output.
fn run(mut cmd: Command, stdin: &str) -> Output {
    crate::support::output_with_input(&mut cmd, stdin.as_bytes())
}

/// Parses a successful run's stdout; checks `secret` never reached stderr.
fn ok_json(out: &Output, secret: &str) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed: {stderr}");
    assert!(
        !stderr.contains(secret),
        "the value leaked to stderr: {stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn index(home: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(home.join("secret-index.json")).unwrap()).unwrap()
}

#[test]
fn secret_round_trips_through_gnome_keyring_across_processes() {
    let keyring = Keyring::start();
    let home = TestHome::new();
    let account = "connector/gh/header/Authorization";
    let secret = "Bearer ghp_round-trip-7f3c9a";

    let mut set = secrets_cmd(&home, &["set", account]);
    keyring.apply(&mut set);
    assert_eq!(
        ok_json(&run(set, secret), secret),
        json!({"backend": "secret-service", "account": account, "stored": true})
    );

    let mut get = secrets_cmd(&home, &["get", account]);
    keyring.apply(&mut get);
    let out = run(get, "");
    assert_eq!(
        ok_json(&out, secret),
        json!({"backend": "secret-service", "account": account, "value": secret})
    );

    assert_eq!(keyring.items(), [Item::car(account, secret)]);
    let index_text = std::fs::read_to_string(home.home.join("secret-index.json")).unwrap();
    assert!(!index_text.contains(secret), "{index_text}");
    assert_eq!(
        index(&home.home),
        json!({"service": "car", "accounts": [account]})
    );
}

#[test]
fn delete_prefix_leaves_nothing_of_the_connector_in_the_keyring() {
    let keyring = Keyring::start();
    let home = TestHome::new();
    let mine = [
        "connector/gh/header/Authorization",
        "connector/gh/header/X-Api-Key",
        "connector/gh/oauth",
    ];
    let other = "connector/gh2/oauth";
    for account in mine.iter().chain([&other]) {
        let mut set = secrets_cmd(&home, &["set", account]);
        keyring.apply(&mut set);
        ok_json(&run(set, &format!("value of {account}")), "value of");
    }
    assert_eq!(keyring.items().len(), 4);

    let mut delete = secrets_cmd(&home, &["delete-prefix", "connector/gh/"]);
    keyring.apply(&mut delete);
    assert_eq!(
        ok_json(&run(delete, ""), "value of"),
        json!({"backend": "secret-service", "prefix": "connector/gh/", "deleted": 3})
    );
    assert_eq!(
        keyring.items(),
        [Item::car(other, &format!("value of {other}"))]
    );
    for account in mine {
        assert_eq!(
            keyring.search(&[("service", "car"), ("username", account)]),
            ""
        );
    }
    assert_eq!(
        index(&home.home),
        json!({"service": "car", "accounts": [other]})
    );

    // A single delete: true once, then false.
    for expected in [true, false] {
        let mut delete = secrets_cmd(&home, &["delete", other]);
        keyring.apply(&mut delete);
        assert_eq!(
            ok_json(&run(delete, ""), "value of")["deleted"],
            json!(expected)
        );
    }
    assert_eq!(keyring.items(), []);
}

#[test]
fn no_reachable_keychain_is_an_error_naming_the_file_opt_in() {
    let home = TestHome::new();
    let empty_runtime = tempfile::tempdir().unwrap();
    let mut set = secrets_cmd(&home, &["set", "connector/gh/oauth"]);
    set.env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("CAR_SECRET_STORE")
        .env("XDG_RUNTIME_DIR", empty_runtime.path());
    let out = run(set, "unstored-value");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: no keychain is reachable for CAR's secrets"),
        "{stderr}"
    );
    for option in [
        "gnome-keyring",
        "KeePassXC",
        "CAR_SECRET_STORE=keyutils",
        "CAR_SECRET_STORE=file",
    ] {
        assert!(last.contains(option), "{option} missing from: {last}");
    }
    assert!(!stderr.contains("unstored-value"), "{stderr}");
    assert!(!home.home.join("secrets.json").exists());
}

#[test]
fn file_store_is_an_owner_only_opt_in() {
    let home = TestHome::new();
    let secret = "file-store-value-51d2";
    let mut set = secrets_cmd(&home, &["set", "connector/f/oauth"]);
    set.env("CAR_SECRET_STORE", "file");
    assert_eq!(ok_json(&run(set, secret), secret)["backend"], "file");
    let mut get = secrets_cmd(&home, &["get", "connector/f/oauth"]);
    get.env("CAR_SECRET_STORE", "file");
    assert_eq!(ok_json(&run(get, ""), secret)["value"], secret);

    let path = home.home.join("secrets.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        file,
        json!({"service": "car", "secrets": {"connector/f/oauth": secret}})
    );
    assert_eq!(
        index(&home.home),
        json!({"service": "car", "accounts": ["connector/f/oauth"]})
    );

    let mut bad = secrets_cmd(&home, &["get", "connector/f/oauth"]);
    bad.env("CAR_SECRET_STORE", "memory");
    let out = run(bad, "");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAR_SECRET_STORE=\"memory\""));
}

/// 4 processes at a time, 10 accounts each, one `set` per process: every name reaches the
/// index (and every value the store).
fn concurrent_sets(home: &TestHome, configure: &(dyn Fn(&mut Command) + Sync)) -> Vec<String> {
    std::thread::scope(|scope| {
        for worker in 0..4 {
            scope.spawn(move || {
                for n in 0..10 {
                    let account = format!("connector/w{worker}/header/H{n}");
                    let mut set = secrets_cmd(home, &["set", &account]);
                    configure(&mut set);
                    ok_json(&run(set, &format!("v-{worker}-{n}")), "v-");
                }
            });
        }
    });
    let mut expected: Vec<String> = (0..4)
        .flat_map(|w| (0..10).map(move |n| format!("connector/w{w}/header/H{n}")))
        .collect();
    expected.sort();
    assert_eq!(
        index(&home.home),
        json!({"service": "car", "accounts": expected})
    );
    expected
}

#[test]
fn concurrent_sets_lose_no_index_entry() {
    let keyring = Keyring::start();
    let home = TestHome::new();
    let accounts = concurrent_sets(&home, &|cmd| {
        keyring.apply(cmd);
    });
    let labels: Vec<String> = keyring.items().into_iter().map(|i| i.label).collect();
    let mut expected: Vec<String> = accounts.iter().map(|a| format!("CAR secret {a}")).collect();
    expected.sort();
    assert_eq!(labels, expected);

    let file_home = TestHome::new();
    let accounts = concurrent_sets(&file_home, &|cmd| {
        cmd.env("CAR_SECRET_STORE", "file");
    });
    let file: Value =
        serde_json::from_slice(&std::fs::read(file_home.home.join("secrets.json")).unwrap())
            .unwrap();
    let stored: Vec<&String> = file["secrets"].as_object().unwrap().keys().collect();
    assert_eq!(stored, accounts.iter().collect::<Vec<_>>());
}

/// The kernel store, in a session keyring of its own (`keyctl session -`), as root in a
/// container needs. Keys go to the user's persistent keyring, which outlives the test, so the
/// account names are unique and the test deletes them.
#[test]
fn keyutils_round_trips_between_sessions() {
    let home = TestHome::new();
    let prefix = format!("connector/test-{}/", uuid::Uuid::new_v4());
    let account = format!("{prefix}oauth");
    let secret = "keyutils-value-0c41";
    let keyctl = |args: &[&str]| {
        let mut cmd = home.command("keyctl");
        cmd.args(["session", "-", example_bin("secrets").to_str().unwrap()])
            .args(args)
            .env("CAR_SECRET_STORE", "keyutils")
            .env("RUST_LOG", "trace");
        cmd
    };
    let out = run(keyctl(&["set", &account]), secret);
    assert!(
        out.status.success(),
        "keyutils set failed (is `keyctl` installed? scripts/test.sh installs keyutils): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ok_json(&out, secret)["backend"], "keyutils");
    assert_eq!(
        ok_json(&run(keyctl(&["get", &account]), ""), secret),
        json!({"backend": "keyutils", "account": account, "value": secret})
    );
    assert_eq!(
        ok_json(&run(keyctl(&["delete-prefix", &prefix]), ""), secret)["deleted"],
        1
    );
    assert_eq!(
        ok_json(&run(keyctl(&["get", &account]), ""), secret)["value"],
        Value::Null
    );
}
