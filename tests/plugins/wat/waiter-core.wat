;; A plugin of the core-module ABI (proto/core-abi), written by hand for the sandbox tests
;; (issue 33, items 1 and 2): `xdst_describe` returns the description the test fills in;
;; `xdst_translate` runs the wait the test puts in its body (a call of one of the functions
;; below, or nothing), then returns no resources. The tests substitute the at-sign words.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sock_accept" (func $sock_accept (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "@DESCRIBE@")
  (data (i32.const 4096) "{\"ok\": {\"resources\": []}}")
  (func (export "xdst_plugin_abi_0_1_0"))
  (func (export "xdst_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (i32.mul (memory.size) (i32.const 65536)))
    (drop (memory.grow (i32.div_u (i32.add (local.get $n) (i32.const 65535)) (i32.const 65536))))
    (local.get $p))
  (func (export "xdst_describe") (result i64) (i64.const @DESCRIBE_LEN@))
  (func (export "xdst_translate") (param $ptr i32) (param $len i32) (result i64)
    @WAIT@
    (i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const 25)))

  ;; poll_oneoff with one clock subscription (at 1024, its event at 1152, the count at 1184):
  ;; `clock` 0 is the wall clock, 1 the monotonic one; `flags` 1 makes `timeout` absolute.
  (func $sleep (param $clock i32) (param $timeout i64) (param $flags i32) (result i32)
    (i64.store (i32.const 1024) (i64.const 7))
    (i32.store8 (i32.const 1032) (i32.const 0))
    (i32.store (i32.const 1040) (local.get $clock))
    (i64.store (i32.const 1048) (local.get $timeout))
    (i64.store (i32.const 1056) (i64.const 0))
    (i32.store16 (i32.const 1064) (local.get $flags))
    (call $poll_oneoff (i32.const 1024) (i32.const 1152) (i32.const 1) (i32.const 1184)))
  ;; u64::MAX nanoseconds on the monotonic clock.
  (func $sleep_forever (drop (call $sleep (i32.const 1) (i64.const -1) (i32.const 0))))
  ;; 30 s on the wall clock.
  (func $sleep_30s (drop (call $sleep (i32.const 0) (i64.const 30000000000) (i32.const 0))))
  ;; Until the monotonic clock reads u64::MAX.
  (func $sleep_until_the_end (drop (call $sleep (i32.const 1) (i64.const -1) (i32.const 1))))
  ;; 1,000,000 calls of sock_accept on stdin (which is not a socket).
  (func $sock_accept_loop
    (local $i i32)
    (loop $again
      (drop (call $sock_accept (i32.const 0) (i32.const 0) (i32.const 1200)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000000)))))
)
