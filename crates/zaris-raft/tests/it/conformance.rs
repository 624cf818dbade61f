use std::sync::Arc;

use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use zaris_raft::{LogStore, NoopObserver, StateMachineStore, TypeConfig};

struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for SledBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError<TypeConfig>> {
        let fail = |e: &dyn std::fmt::Display| {
            StorageError::<TypeConfig>::write(TypeConfig::err_from_string(e.to_string()))
        };
        let dir = tempfile::tempdir().map_err(|e| fail(&e))?;
        let (log, sm) = zaris_raft::open(
            dir.path(),
            Arc::new(NoopObserver),
            zaris_core::Limits::default(),
        )
        .await
        .map_err(|e| fail(&e))?;
        Ok((dir, log, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_stores_pass_openraft_conformance_suite() {
    if let Err(e) = Suite::test_all(SledBuilder).await {
        panic!("conformance suite failed: {e}");
    }
}
