package dev.fencelock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * Core's metrics JSON ({@code MetricsSnapshot::to_json}, {@code families_json}) → {@link FencelockMetrics} and
 * {@link MetricFamily}. A small reader of the JSON core writes (objects, arrays, strings, numbers, booleans, null), so
 * the jar needs no JSON library; a reply of another shape is a bug and fails as {@code INTERNAL}.
 */
final class MetricsJson {
    private final String text;
    private int at;

    private MetricsJson(String text) {
        this.text = text;
    }

    static FencelockMetrics metrics(String json) {
        Map<String, Object> m = object(parse(json), "the snapshot");
        return new FencelockMetrics(string(m, "backend"), (Boolean) field(m, "enabled"),
                map(m, "acquire_wait", MetricsJson::histogram), histogram(field(m, "hold_time")),
                count(field(m, "active_leases")), map(m, "renewals", MetricsJson::count),
                map(m, "lost", MetricsJson::count), map(m, "fence_writes", MetricsJson::count),
                count(field(m, "local_queue_depth")),
                map(m, "backend_ops", byOutcome -> entries(byOutcome, "backend_ops", MetricsJson::histogram)),
                map(m, "names", MetricsJson::name));
    }

    static List<MetricFamily> families(String json) {
        List<MetricFamily> out = new ArrayList<>();
        for (Object f : list(parse(json), "the families")) {
            Map<String, Object> family = object(f, "a family");
            List<MetricFamily.Sample> samples = new ArrayList<>();
            for (Object s : list(field(family, "samples"), "samples")) {
                Map<String, Object> sample = object(s, "a sample");
                Object value = sample.get("value");
                Object histogram = sample.get("histogram");
                samples.add(new MetricFamily.Sample(map(sample, "labels", v -> (String) v),
                        value == null ? OptionalDouble.empty() : OptionalDouble.of(((Number) value).doubleValue()),
                        histogram == null ? Optional.empty() : Optional.of(histogram(histogram))));
            }
            out.add(new MetricFamily(string(family, "name"), string(family, "help"),
                    MetricFamily.Type.valueOf(string(family, "type").toUpperCase(java.util.Locale.ROOT)),
                    Collections.unmodifiableList(samples)));
        }
        return Collections.unmodifiableList(out);
    }

    private static FencelockMetrics.NameMetrics name(Object json) {
        Map<String, Object> n = object(json, "a name's figures");
        return new FencelockMetrics.NameMetrics(map(n, "acquire_wait", MetricsJson::histogram),
                histogram(field(n, "hold_time")), count(field(n, "active_leases")), count(field(n, "lost")),
                count(field(n, "local_queue_depth")));
    }

    private static FencelockMetrics.Histogram histogram(Object json) {
        Map<String, Object> h = object(json, "a histogram");
        List<FencelockMetrics.Bucket> buckets = new ArrayList<>();
        for (Object b : list(field(h, "buckets"), "buckets")) {
            Map<String, Object> bucket = object(b, "a bucket");
            Object le = bucket.get("le"); // null is +Inf
            double bound = le == null ? Double.POSITIVE_INFINITY : ((Number) le).doubleValue();
            buckets.add(new FencelockMetrics.Bucket(bound, count(field(bucket, "count"))));
        }
        return new FencelockMetrics.Histogram(count(field(h, "count")), ((Number) field(h, "sum")).doubleValue(),
                Collections.unmodifiableList(buckets));
    }

    private static long count(Object json) {
        return ((Number) json).longValue();
    }

    private static <V> Map<String, V> map(Map<String, Object> parent, String key, Function<Object, V> value) {
        return entries(field(parent, key), key, value);
    }

    /** A JSON object as a sorted map, its values converted by {@code value}. */
    private static <V> Map<String, V> entries(Object json, String what, Function<Object, V> value) {
        Map<String, V> out = new TreeMap<>();
        object(json, what).forEach((k, v) -> out.put(k, value.apply(v)));
        return Collections.unmodifiableMap(out);
    }

    private static Object field(Map<String, Object> m, String key) {
        if (!m.containsKey(key)) {
            throw shape("no field " + key);
        }
        return m.get(key);
    }

    private static String string(Map<String, Object> m, String key) {
        return (String) field(m, key);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object json, String what) {
        if (json instanceof Map) {
            return (Map<String, Object>) json;
        }
        throw shape(what + " is not an object");
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object json, String what) {
        if (json instanceof List) {
            return (List<Object>) json;
        }
        throw shape(what + " is not an array");
    }

    private static LockException shape(String why) {
        return new LockException(ErrorKind.INTERNAL, "unexpected metrics JSON from the native library: " + why);
    }

    /** The value of one JSON text: Map (key order kept), List, String, Long or Double, Boolean, or null. */
    static Object parse(String json) {
        MetricsJson r = new MetricsJson(json);
        Object v = r.value();
        r.space();
        if (r.at != json.length()) {
            throw r.error("trailing text");
        }
        return v;
    }

    private Object value() {
        space();
        if (at >= text.length()) {
            throw error("unexpected end");
        }
        char c = text.charAt(at);
        switch (c) {
            case '{':
                return objectValue();
            case '[':
                return arrayValue();
            case '"':
                return stringValue();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                return number();
        }
    }

    private Map<String, Object> objectValue() {
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        at++; // {
        if (peek() == '}') {
            at++;
            return out;
        }
        do {
            space();
            String key = stringValue();
            expect(':');
            out.put(key, value());
        } while (next(',', '}'));
        return out;
    }

    private List<Object> arrayValue() {
        List<Object> out = new ArrayList<>();
        at++; // [
        if (peek() == ']') {
            at++;
            return out;
        }
        do {
            out.add(value());
        } while (next(',', ']'));
        return out;
    }

    /** True after {@code more}, false after {@code end}. */
    private boolean next(char more, char end) {
        char c = peek();
        at++;
        if (c == more || c == end) {
            return c == more;
        }
        throw error("expected '" + more + "' or '" + end + "'");
    }

    private String stringValue() {
        if (peek() != '"') {
            throw error("expected a string");
        }
        StringBuilder out = new StringBuilder();
        for (at++; at < text.length(); at++) {
            char c = text.charAt(at);
            if (c == '"') {
                at++;
                return out.toString();
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (++at >= text.length()) {
                break;
            }
            char e = text.charAt(at);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'u' -> {
                    out.append(hex4());
                    at += 4;
                }
                default -> out.append(e); // \" \\ \/
            }
        }
        throw error("unterminated string");
    }

    /** The four hex digits after {@code \\u} at {@code at}. */
    private char hex4() {
        try {
            return (char) Integer.parseInt(text.substring(at + 1, at + 5), 16);
        } catch (IndexOutOfBoundsException | NumberFormatException e) {
            throw error("bad \\u escape");
        }
    }

    private Number number() {
        int start = at;
        boolean integral = true;
        while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
            integral &= Character.isDigit(text.charAt(at)) || text.charAt(at) == '-';
            at++;
        }
        String n = text.substring(start, at);
        try {
            return integral ? (Number) Long.parseLong(n) : (Number) Double.parseDouble(n);
        } catch (NumberFormatException e) {
            throw error("bad number " + FencelockClient.quote(n));
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, at)) {
            throw error("bad literal");
        }
        at += word.length();
        return value;
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("expected '" + c + "'");
        }
        at++;
    }

    private char peek() {
        space();
        if (at >= text.length()) {
            throw error("unexpected end");
        }
        return text.charAt(at);
    }

    private void space() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private LockException error(String why) {
        return shape(why + " at offset " + at);
    }
}
