//! CustomResourceDefinitions for the Kairon kinds, served as `v1` (storage) and `v1alpha1`
//! (same schema, so the `v1alpha1` manifests of the sandbox track apply unchanged).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use kube::CustomResourceExt;

use crate::{KaironNode, KaironQuota, KaironTemplate, Machine, MachineClaim, MachinePool, STORAGE_VERSION, VERSIONS};

/// Every Kairon CRD, each carrying all served versions and the validation rules.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        with_versions(Machine::crd()),
        with_versions(MachinePool::crd()),
        with_versions(MachineClaim::crd()),
        with_versions(KaironNode::crd()),
        with_versions(KaironQuota::crd()),
        with_versions(KaironTemplate::crd()),
    ];
    // The rules a cluster's API server enforces by itself (`rules.rs`).
    crds.iter_mut().for_each(crate::rules::apply);
    crds
}

fn with_versions(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let Some(storage) = crd.spec.versions.first().cloned() else {
        return crd;
    };
    crd.spec.versions = VERSIONS
        .iter()
        .map(|v| {
            let mut version = storage.clone();
            version.name = v.to_string();
            version.storage = *v == STORAGE_VERSION;
            version
        })
        .collect();
    crd
}

/// The CRDs as one multi-document YAML stream (what `kairon crds` prints).
pub fn yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// The printer columns of a kind's CRD, for server-side Table responses.
pub fn printer_columns(crd: &CustomResourceDefinition) -> Vec<CustomResourceColumnDefinition> {
    crd.spec.versions.first().and_then(|v| v.additional_printer_columns.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_and_the_spec_columns() {
        let crds = all();
        assert_eq!(crds.len(), 6);
        for crd in &crds {
            let names: Vec<_> = crd.spec.versions.iter().map(|v| (v.name.as_str(), v.storage)).collect();
            assert_eq!(names, [("v1", true), ("v1alpha1", false)]);
            assert!(
                crd.spec.versions.iter().all(|v| v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some())
            );
        }
        let cols = |i: usize| printer_columns(&crds[i]).into_iter().map(|c| c.name).collect::<Vec<_>>();
        assert!(cols(1).contains(&"Warm-State".to_string()));
        for c in ["Active", "Suspended", "VCPU-S"] {
            assert!(cols(2).contains(&c.to_string()), "{c}");
        }
    }

    /// The committed manifests must match the code; `KAIRON_BLESS=1 cargo test` rewrites them.
    #[test]
    fn committed_manifests_match() {
        let want = yaml().unwrap();
        // `kairon crds`, and the copies the kustomize base and the Helm chart install (neither
        // reads a file outside its directory).
        for file in ["deploy/crds.yaml", "deploy/kustomize/crds.yaml", "deploy/helm/kairon/crds/crds.yaml"] {
            let path = format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"));
            if std::env::var_os("KAIRON_BLESS").is_some() {
                std::fs::write(&path, &want).unwrap();
            }
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(have == want, "{file} is stale: run `KAIRON_BLESS=1 cargo test -p kairon-model` and commit it");
        }
    }

    #[test]
    fn schemas_carry_defaults() {
        let y = yaml().unwrap();
        assert!(y.contains("idleCPUMillicores"));
        assert!(y.contains("default: Pause"), "idleAction default");
        assert!(y.contains("x-kubernetes-int-or-string: true"));
    }
}
