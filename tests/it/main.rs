//! xdst's integration tests, one binary with a module per suite (issue 34, item 4): wasmtime,
//! tonic and etcd-client are linked once, not once per suite. Each module's header says what
//! it proves and against which real parts (the `xdst` binary, Envoy, etcd, grpcio clients).
//!
//! One suite, or one test:
//!
//!     cargo test -p xdst-tests --test it grpc::
//!     cargo test -p xdst-tests --test it plugin_swaps::a_swap_during_a_translation -- --nocapture
//!
//! No suite needs a process of its own: none sets process-wide state (environment variables,
//! the working directory, `xdst_core` limits), and the in-process servers (`grpc`, `clients`,
//! `tls`, `mtls`) count into their own metrics. Deadlines stretch with `$XDST_TEST_PATIENCE`
//! (see `xdst_tests::wait`).

mod admin_secrets;
mod cli;
mod clients;
mod conformance;
mod containment;
mod distribution;
mod docs;
mod edges;
mod edges_files;
mod edges_plugins;
mod edges_scope;
mod edges_secrets;
mod edges_time;
mod envoy;
mod envoy_plugins;
mod flow_control;
mod gateway_api;
mod gateway_api_backend_tls;
mod gateway_api_l4;
mod gateway_api_listener_sets;
mod gateway_api_report;
mod gateway_api_status;
mod gateway_api_status_schema;
mod go_plugins;
mod grpc;
mod hold_cost;
mod hold_group;
mod hold_restart;
mod hold_scope;
mod incremental;
mod incremental_pipeline;
mod intent_api;
mod kubernetes_objects;
mod limits;
mod listener_lifecycle;
mod make_before_break;
mod mtls;
mod operator;
mod operator_trust;
mod plugin_refusals;
mod plugin_swaps;
mod plugin_tool;
mod plugins;
mod quarantine;
mod reload;
mod resource_errors;
mod route_scopes;
mod store;
mod store_failover;
mod store_plugins;
mod tls;
