;; A component of the xdst:plugin@0.1.0 world, written by hand for the sandbox tests (issue 33,
;; item 1): `describe` gives the name and kind the test fills in; `translate` runs the wait the
;; test puts in its body (a call of one of the functions below, or nothing), then returns no
;; resources. It waits through WASI 0.2: `wasi:clocks/monotonic-clock` `subscribe-duration`
;; and `wasi:io/poll` (`poll` or `pollable.block`). The tests substitute the at-sign words.
(component $C
  (import "wasi:io/poll@0.2.0" (instance $poll
    (export "pollable" (type $p (sub resource)))
    (export "[method]pollable.block" (func (param "self" (borrow $p))))
    (export "poll" (func (param "in" (list (borrow $p))) (result (list u32))))
  ))
  (alias export $poll "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer $C $pollable (type $p))
    (export "subscribe-duration" (func (param "when" u64) (result (own $p))))
  ))

  ;; The memory and a bump allocator, first: `poll`'s result is written through them.
  (core module $Memory
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 16384))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (i32.and (i32.add (global.get $next) (i32.const 7)) (i32.const -8)))
      (global.set $next (i32.add (local.get $p) (local.get 3)))
      (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
        (then (drop (memory.grow (i32.add (i32.div_u (local.get 3) (i32.const 65536)) (i32.const 1))))))
      (local.get $p)))
  (core instance $mem (instantiate $Memory))
  (alias core export $mem "memory" (core memory $memory))
  (alias core export $mem "realloc" (core func $realloc))
  (core func $subscribe (canon lower (func $clock "subscribe-duration")))
  (core func $block (canon lower (func $poll "[method]pollable.block")))
  (core func $poll_list (canon lower (func $poll "poll") (memory $memory) (realloc $realloc)))

  (core module $Plugin
    (import "env" "memory" (memory 1))
    (import "wasi" "subscribe-duration" (func $subscribe (param i64) (result i32)))
    (import "wasi" "block" (func $block (param i32)))
    (import "wasi" "poll" (func $poll (param i32 i32 i32)))
    (data (i32.const 1024) "@NAME@")
    (data (i32.const 1536) "0.1.0")
    (data (i32.const 2048) "@KIND@")
    ;; plugin-info at 64: name, version, kinds (one string, at 128), phase, granularity.
    (func (export "describe") (result i32)
      (i32.store (i32.const 64) (i32.const 1024))
      (i32.store (i32.const 68) (i32.const @NAME_LEN@))
      (i32.store (i32.const 72) (i32.const 1536))
      (i32.store (i32.const 76) (i32.const 5))
      (i32.store (i32.const 80) (i32.const 128))
      (i32.store (i32.const 84) (i32.const 1))
      (i32.store8 (i32.const 88) (i32.const 0))
      (i32.store8 (i32.const 89) (i32.const 1))
      (i32.store (i32.const 128) (i32.const 2048))
      (i32.store (i32.const 132) (i32.const @KIND_LEN@))
      (i32.const 64))
    ;; The result at 256 is all zeros: `ok` with no resources and no diagnostics.
    (func (export "translate") (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      @WAIT@
      (i32.const 256))
    ;; u64::MAX nanoseconds, through `pollable.block`.
    (func $block_forever (call $block (call $subscribe (i64.const -1))))
    ;; 30 s, through `poll` (its list at 512, its result at 520).
    (func $poll_30s
      (i32.store (i32.const 512) (call $subscribe (i64.const 30000000000)))
      (call $poll (i32.const 512) (i32.const 1) (i32.const 520)))
    ;; 1 ms, through `poll`.
    (func $poll_1ms
      (i32.store (i32.const 512) (call $subscribe (i64.const 1000000)))
      (call $poll (i32.const 512) (i32.const 1) (i32.const 520))))
  (core instance $env (export "memory" (memory $memory)))
  (core instance $wasi
    (export "subscribe-duration" (func $subscribe))
    (export "block" (func $block))
    (export "poll" (func $poll_list)))
  (core instance $plugin (instantiate $Plugin (with "env" (instance $env)) (with "wasi" (instance $wasi))))

  (type $phase' (enum "translate" "patch"))
  (export $phase "phase" (type $phase'))
  (type $granularity' (enum "per-document" "whole-set"))
  (export $granularity "granularity" (type $granularity'))
  (type $info' (record (field "name" string) (field "version" string) (field "kinds" (list string))
    (field "phase" $phase) (field "granularity" $granularity)))
  (export $info "plugin-info" (type $info'))
  (type $document' (record (field "kind" string) (field "name" string) (field "origin" string) (field "json" string)))
  (export $document "intent-document" (type $document'))
  (type $body' (variant (case "json" string) (case "proto" (list u8))))
  (export $body "body" (type $body'))
  (type $resource' (record (field "type-url" string) (field "name" string) (field "body" $body)
    (field "document" (option string))))
  (export $resource "xds-resource" (type $resource'))
  (type $request' (record (field "node-group" string) (field "documents" (list $document))
    (field "resources" (list $resource)) (field "config" string)))
  (export $request "translate-request" (type $request'))
  (type $severity' (enum "info" "warning"))
  (export $severity "severity" (type $severity'))
  (type $diagnostic' (record (field "severity" $severity) (field "message" string) (field "document" (option string))
    (field "field" (option string))))
  (export $diagnostic "diagnostic" (type $diagnostic'))
  (type $response' (record (field "resources" (list $resource)) (field "diagnostics" (list $diagnostic))))
  (export $response "translate-response" (type $response'))
  (type $error' (record (field "message" string) (field "document" (option string)) (field "field" (option string))))
  (export $error "plugin-error" (type $error'))
  (func $describe (result $info) (canon lift (core func $plugin "describe") (memory $memory)))
  (export "describe" (func $describe))
  (func $translate (param "request" $request) (result (result $response (error $error)))
    (canon lift (core func $plugin "translate") (memory $memory) (realloc $realloc)))
  (export "translate" (func $translate))
)
