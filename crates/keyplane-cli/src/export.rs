//! `keyplane export`: a fresh lookup blob from a control state, the
//! recovery when a delta was lost (or a replica must be reseeded).

use crate::state::State;
use crate::{CliError, Progress};
use clap::Args;

/// `keyplane export`.
#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// Control state written by `build --control` and kept current by `update`.
    #[arg(long)]
    pub control: String,
    /// Output lookup blob (replaces a replica that missed deltas).
    #[arg(long)]
    pub out: String,
}

/// Restores the control form from the state (its snapshot, or a legacy
/// journal checked against the recorded export) and writes its lookup blob.
pub fn export(a: &ExportArgs) -> Result<u8, CliError> {
    crate::paths::refuse_same(&[("--control", &a.control)], &[("--out", &a.out)])?;
    let bytes = crate::cmd::read_file(&a.control)?;
    let st = State::from_bytes(&a.control, &bytes)?;
    let sp = Progress::spinner("loading the control state");
    let ctl = st.control(&a.control)?;
    let blob = ctl.export().to_bytes();
    sp.finish();
    crate::cmd::write_file(&a.out, &blob)?;
    eprintln!(
        "exported {} over {} keys ({} updates since the build), blob {} bytes → {}",
        st.structure,
        ctl.len(),
        st.updates,
        blob.len(),
        a.out
    );
    Ok(0)
}
