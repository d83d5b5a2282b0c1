/** Token of an `Authorization: Bearer <token>` header (scheme case-insensitive, RFC 6750), or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer +([\x21-\x7e]+) *$/i);
  return match?.[1];
}
