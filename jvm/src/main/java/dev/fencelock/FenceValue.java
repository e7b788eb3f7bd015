package dev.fencelock;

/**
 * A fenced register's content.
 *
 * @param token the highest token accepted so far (0 if never written)
 * @param value the value written with it (empty if never written)
 */
public record FenceValue(long token, byte[] value) {}
