// IP address literals with the grammar of Rust's `IpAddr::from_str`, which the reference
// uses: dotted-quad IPv4 (no leading zeros), IPv6 in its usual forms (`::`, an embedded IPv4
// tail), no zone and no brackets. Returns a normalised key, so `::1` and `0::1` compare equal.

class Reader {
  i: i32 = 0;
  constructor(public s: string) {}

  peek(): i32 {
    return this.i < this.s.length ? this.s.charCodeAt(this.i) : -1;
  }

  eat(c: i32): bool {
    if (this.peek() != c) return false;
    this.i++;
    return true;
  }

  /** A number of at most `maxDigits` digits in `radix`; -1 if there is none (or it is longer). */
  number(radix: i32, maxDigits: i32, allowZeroPrefix: bool): i64 {
    const start = this.i;
    const leadingZero = this.peek() == 0x30;
    let n: i64 = 0;
    let count = 0;
    while (true) {
      const c = this.peek();
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (radix == 16 && c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (radix == 16 && c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) break;
      this.i++;
      n = n * radix + d;
      if (++count > maxDigits) {
        this.i = start;
        return -1;
      }
    }
    if (count == 0 || (!allowZeroPrefix && leadingZero && count > 1)) {
      this.i = start;
      return -1;
    }
    return n;
  }

  /** Four octets; an empty array if there is no IPv4 address here. */
  ipv4(): Array<i32> {
    const start = this.i;
    const out = new Array<i32>();
    for (let k = 0; k < 4; k++) {
      if (k > 0 && !this.eat(0x2e)) break;
      const n = this.number(10, 3, false);
      if (n < 0 || n > 255) break;
      out.push(<i32>n);
    }
    if (out.length != 4) {
      this.i = start;
      return [];
    }
    return out;
  }

  /**
   * Reads up to `limit` colon-separated groups into `groups` (an IPv4 tail counts as two);
   * returns how many, and whether it ended with an IPv4 tail (as the high bit).
   */
  groups(groups: Array<i32>, limit: i32): i32 {
    for (let k = 0; k < limit; k++) {
      if (k < limit - 1) {
        const start = this.i;
        if (k == 0 || this.eat(0x3a)) {
          const v4 = this.ipv4();
          if (v4.length == 4) {
            groups.push((v4[0] << 8) | v4[1]);
            groups.push((v4[2] << 8) | v4[3]);
            return (k + 2) | 0x100;
          }
        }
        this.i = start;
      }
      const start = this.i;
      if (k > 0 && !this.eat(0x3a)) return k;
      const g = this.number(16, 4, true);
      if (g < 0) {
        this.i = start;
        return k;
      }
      groups.push(<i32>g);
    }
    return limit;
  }

  /** Eight groups, or an empty array. */
  ipv6(): Array<i32> {
    const head = new Array<i32>();
    const h = this.groups(head, 8);
    const headSize = h & 0xff;
    if (headSize == 8) return head;
    if (h & 0x100) return [];
    if (!this.eat(0x3a) || !this.eat(0x3a)) return [];
    const tail = new Array<i32>();
    const tailSize = this.groups(tail, 8 - (headSize + 1)) & 0xff;
    const out = head.slice(0, headSize);
    for (let k = headSize; k < 8 - tailSize; k++) out.push(0);
    for (let k = 0; k < tailSize; k++) out.push(tail[k]);
    return out;
  }
}

/**
 * The address as a comparable key (`4:10.0.0.1`, `6:0:0:0:0:0:0:0:1`), or "" if `s` is not an
 * IP address.
 */
export function parseIp(s: string): string {
  let r = new Reader(s);
  const v4 = r.ipv4();
  if (v4.length == 4 && r.i == s.length) return "4:" + v4.join(".");
  r = new Reader(s);
  const v6 = r.ipv6();
  if (v6.length == 8 && r.i == s.length) return "6:" + v6.join(":");
  return "";
}
