module {{name}}

go 1.24

require xdst.dev/guest v0.0.0

// The xdst SDK, copied beside the plugin by `xdst plugin new` (standard library only).
replace xdst.dev/guest => ./sdk
