module xdst.dev/go-probe

go 1.24

require xdst.dev/guest v0.0.0

replace xdst.dev/guest => ../../../guest-sdk/go/sdk
