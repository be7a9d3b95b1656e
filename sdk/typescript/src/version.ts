/** The SDK version, sent in its User-Agent (`kairon-sdk-typescript/<version>`). */
export const VERSION = "0.2.0";
