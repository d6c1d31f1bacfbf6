//! The Envoy API descriptor pool, generated from the protos of the `envoy-types` crate
//! by `host/core/gen/envoy-descriptors.sh` (a test keeps the checked-in file current).

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

static BYTES: &[u8] = include_bytes!("../gen/envoy-descriptors.bin");

/// Every Envoy v3 message, extension and service, with their imports.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(BYTES).expect("checked-in Envoy descriptors decode"))
}

/// The descriptor for a type URL, if the pool knows the message.
pub fn message_for_type_url(type_url: &str) -> Option<MessageDescriptor> {
    pool().get_message_by_name(crate::types::message_name(type_url)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pool_has_core_types_and_extensions() {
        for t in crate::types::CORE_TYPES {
            assert!(super::message_for_type_url(t).is_some(), "{t}");
        }
        let hcm = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
        assert!(super::pool().get_message_by_name(hcm).is_some());
        assert!(super::pool().get_message_by_name("envoy.service.discovery.v3.DiscoveryRequest").is_some());
    }
}
