//! `car doctor`: the composition root's checks (`app::doctor`), rendered for a person.

use super::{render_typed, Env, Failure, Printed};
use crate::project::Mode;

/// `car doctor`; with [`Mode::Apply`] (`--fix`), repairs what the project checks can.
pub(crate) fn execute(env: &Env, mode: Mode) -> Printed {
    let doctor = crate::app::doctor::run(&env.home, &env.project_root, mode);
    let result = match doctor.failure() {
        None => Ok(doctor),
        Some(message) => Err(Failure::new("unhealthy", message)),
    };
    render_typed(env.json, "doctor", result, |doctor| {
        doctor
            .checks
            .iter()
            .map(|c| {
                format!(
                    "{} {:<15} {}\n",
                    if c.ok { "ok  " } else { "FAIL" },
                    c.check,
                    c.detail
                )
            })
            .collect()
    })
}
