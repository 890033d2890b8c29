// The private exposure's token and its check. The token is 32 random bytes (base64url); a request
// passes only with exactly `authorization: Bearer <token>`. The comparison runs over digests of
// equal length, so its time says nothing about how much of a guess was right, nor its length.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const TOKEN_BYTES = 32;

export function createToken() {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

/** The headers a client must present for `token`. */
export function authHeadersFor(token) {
  return Object.freeze({ authorization: `Bearer ${token}` });
}

const digest = (text) => createHash('sha256').update(text, 'utf8').digest();

/** A gate for one token: `allows(headerValue)` is true for exactly `Bearer <token>`. */
export function tokenGate(token) {
  const expected = digest(`Bearer ${token}`);
  return Object.freeze({
    allows(header) {
      // The endpoint passes the one value of exactly one authorization header.
      if (typeof header !== 'string') return false;
      return timingSafeEqual(digest(header), expected);
    },
  });
}
