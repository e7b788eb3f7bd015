package dev.fencelock;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/** Whether the calling thread is virtual (Java 21+; this jar is built for 17, so through a method handle). */
final class Threads {
    private static final MethodHandle IS_VIRTUAL = lookup();

    private Threads() {}

    private static MethodHandle lookup() {
        try {
            return MethodHandles.publicLookup().findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
        } catch (ReflectiveOperationException beforeJava21) {
            return null;
        }
    }

    /** Virtual threads must not block in native code (it pins their carrier), so they wait in Java. */
    static boolean currentIsVirtual() {
        if (IS_VIRTUAL == null) {
            return false;
        }
        try {
            return (boolean) IS_VIRTUAL.invokeExact(Thread.currentThread());
        } catch (Throwable t) {
            return false;
        }
    }
}
