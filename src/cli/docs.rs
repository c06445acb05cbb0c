//! `car completions SHELL` and `car man [--out DIR]`: shell completion scripts and man pages,
//! generated from the same clap tree the command line parses with (clap_complete, clap_mangen),
//! so they can never describe another version. The release archives ship both (dist/package.sh).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use serde::{Deserialize, Serialize};

use super::console::stdout as write_stdout;
use super::{finish, finish_typed, Cli, Failure};

/// Arguments of `car completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `car man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (car.1, car-memory.1, car-memory-add.1, …) into DIR, creating
    /// it; without it, the page of `car` itself goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub const COMPLETIONS_HELP: &str = "Install (the script is printed on stdout):
  car completions bash > ~/.local/share/bash-completion/completions/car
  car completions zsh > ~/.zfunc/_car        # with fpath+=(~/.zfunc) before compinit
  car completions fish > ~/.config/fish/completions/car.fish
  car completions powershell >> $PROFILE";

pub const MAN_HELP: &str = "Examples:
  car man | man -l -                         # read car(1) now
  car man --out ~/.local/share/man/man1      # every page, for `man car-memory-query`";

/// Prints the completion script.
pub fn completions(args: &CompletionsArgs) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "car", &mut script);
    write_stdout(&String::from_utf8_lossy(&script));
    ExitCode::SUCCESS
}

/// Prints car(1), or writes every page into `--out`.
pub fn man(json: bool, args: &ManArgs) -> ExitCode {
    let Some(dir) = &args.out else {
        let mut page = Vec::new();
        return match clap_mangen::Man::new(Cli::command()).render(&mut page) {
            Ok(()) => {
                write_stdout(&String::from_utf8_lossy(&page));
                ExitCode::SUCCESS
            }
            Err(e) => finish(
                json,
                "man",
                Err(Failure::new(
                    "io",
                    format!("cannot render the man page: {e}"),
                )),
                |_| String::new(),
            ),
        };
    };
    let result = write_pages(dir).map(|pages| ManPages {
        dir: dir.clone(),
        pages,
    });
    finish_typed(json, "man", result, |written| {
        format!(
            "wrote {} man pages to {}",
            written.pages.len(),
            written.dir.display()
        )
    })
}

/// What `car man --out DIR` wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManPages {
    pub dir: PathBuf,
    /// The page files, sorted: car.1, car-memory.1, …
    pub pages: Vec<String>,
}

fn write_pages(dir: &Path) -> Result<Vec<String>, Failure> {
    let failed = |e: std::io::Error| {
        Failure::new(
            "io",
            format!("cannot write the man pages into {}: {e}", dir.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    clap_mangen::generate_to(Cli::command(), dir).map_err(failed)?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .map_err(failed)?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with("car") && name.ends_with(".1"))
        .collect();
    pages.sort();
    Ok(pages)
}
