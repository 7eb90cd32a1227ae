//! What every lock guard does when dropped unreleased, written once: its
//! hold is given back in the background, run to its end by the client's
//! spawner (so the drop neither blocks nor is cut short).

/// Implements `Drop` for `$guard`, which has fields `core: Arc<Core>` and
/// `released: bool`, and a method `stop_and_release(&self)` returning the
/// release as a `Send + 'static` future.
macro_rules! release_on_drop {
    ($guard:ident) => {
        impl Drop for $guard {
            fn drop(&mut self) {
                if !self.released {
                    self.released = true;
                    let release = self.stop_and_release();
                    crate::engine::cancel::spawn_undo(&self.core.background, async move {
                        let _ = release.await;
                    });
                }
            }
        }
    };
}

pub(crate) use release_on_drop;
