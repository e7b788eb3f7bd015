//! JNI glue for the `dev.fencelock` Java package (issue 8; being written).
