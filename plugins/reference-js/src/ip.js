// IP address literals exactly as Rust's `IpAddr::from_str` reads them: dotted-quad IPv4
// without leading zeros, IPv6 with at most one `::` and an optional trailing IPv4 part, no zone,
// no brackets. Returns a canonical key (`v4:10.0.0.1`, `v6:0:0:0:0:0:0:0:1`) to compare
// addresses by value, or null when `s` is not an IP address.

export function parseIp(s) {
  const v4 = new Cursor(s).whole((c) => c.ipv4());
  if (v4) return `v4:${v4.join(".")}`;
  const v6 = new Cursor(s).whole((c) => c.ipv6());
  return v6 ? `v6:${v6.map((g) => g.toString(16)).join(":")}` : null;
}

class Cursor {
  constructor(s) {
    this.s = s;
    this.i = 0;
  }

  /** Runs `read`, which returns a value or null; on null the position is restored. */
  atomically(read) {
    const start = this.i;
    const value = read(this);
    if (value === null) this.i = start;
    return value;
  }

  whole(read) {
    const value = read(this);
    return value !== null && this.i === this.s.length ? value : null;
  }

  char(c) {
    if (this.s[this.i] !== c) return null;
    this.i++;
    return c;
  }

  /** At most `maxDigits` digits in `radix`, value at most `max`. */
  number(radix, maxDigits, max, allowZeroPrefix) {
    return this.atomically((p) => {
      const leadingZero = p.s[p.i] === "0";
      let value = 0;
      let count = 0;
      for (;;) {
        const c = p.s[p.i];
        const digit = c === undefined ? NaN : parseInt(c, radix);
        if (Number.isNaN(digit)) break;
        p.i++;
        value = value * radix + digit;
        count++;
        if (count > maxDigits || value > max) return null;
      }
      if (count === 0 || (!allowZeroPrefix && leadingZero && count > 1)) return null;
      return value;
    });
  }

  ipv4() {
    return this.atomically((p) => {
      const octets = [];
      for (let i = 0; i < 4; i++) {
        if (i > 0 && p.char(".") === null) return null;
        const octet = p.number(10, 3, 255, false);
        if (octet === null) return null;
        octets.push(octet);
      }
      return octets;
    });
  }

  /** Reads up to `limit` groups; returns [groups, endedWithIpv4]. */
  groups(limit) {
    const groups = [];
    for (let i = 0; i < limit; i++) {
      if (i < limit - 1) {
        const v4 = this.atomically((p) => (i > 0 && p.char(":") === null ? null : p.ipv4()));
        if (v4 !== null) {
          groups.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
          return [groups, true];
        }
      }
      const group = this.atomically((p) => (i > 0 && p.char(":") === null ? null : p.number(16, 4, 0xffff, true)));
      if (group === null) return [groups, false];
      groups.push(group);
    }
    return [groups, false];
  }

  ipv6() {
    return this.atomically((p) => {
      const [head, headIpv4] = p.groups(8);
      if (head.length === 8) return head;
      // An IPv4 part is not allowed before `::`.
      if (headIpv4 || p.char(":") === null || p.char(":") === null) return null;
      // `::` stands for at least one group of zeros.
      const [tail] = p.groups(8 - (head.length + 1));
      return [...head, ...new Array(8 - head.length - tail.length).fill(0), ...tail];
    });
  }
}
