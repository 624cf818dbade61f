//! Fault injection in the storage layer, the crate's one seam for it. A store holds a
//! [`StoreFaults`]; only `fault-injection` builds can make one that is not the default (no bug,
//! no pause), so release builds carry none of it and the store's code needs no `cfg`.

use zaris_core::{Faults, State};

/// The store's deliberate faults: state-machine bugs for every state it holds or installs, and
/// an install pause the harness kills nodes in.
#[derive(Clone, Debug, Default)]
pub struct StoreFaults {
    state: Faults,
    /// How long an armed install waits between saving the snapshot and switching to its state,
    /// and the file whose appearance arms it (one install per trigger, so other installs keep
    /// their pace).
    #[cfg(feature = "fault-injection")]
    install_pause: Option<(std::time::Duration, std::path::PathBuf)>,
}

#[cfg(feature = "fault-injection")]
impl StoreFaults {
    /// `state` on every replica alike; a zero `install_pause` arms nothing.
    pub fn new(
        state: Faults,
        install_pause: std::time::Duration,
        trigger: std::path::PathBuf,
    ) -> Self {
        StoreFaults {
            state,
            install_pause: (!install_pause.is_zero()).then_some((install_pause, trigger)),
        }
    }
}

impl StoreFaults {
    /// Sets the bugs on a state (a state does not carry them: they are configuration).
    pub(crate) fn configure(&self, state: &mut State) {
        state.set_faults(self.state);
    }

    /// After a snapshot is saved and before its state replaces the current one: waits out an
    /// armed pause, and disarms it. Nothing in builds without `fault-injection`.
    pub(crate) async fn pause_install(&self) {
        #[cfg(feature = "fault-injection")]
        if let Some((pause, trigger)) = &self.install_pause
            && std::fs::remove_file(trigger).is_ok()
        {
            tracing::warn!(
                ?pause,
                "snapshot saved; pausing the install (fault injection)"
            );
            tokio::time::sleep(*pause).await;
        }
    }
}
