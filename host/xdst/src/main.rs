//! `xdst`: an xDS control plane for Envoy and proxyless gRPC (see [`xdst::cli`]).

fn main() -> anyhow::Result<()> {
    xdst::cli::main()
}
