/*
 * Signing recipe of the merchant payment service, in Java 17 with the JDK only.
 *
 * Copy the methods you need; main() shows them at work. Three signing strings (contract
 * decisions.md sections 1, 3 and 7), all RSASSA-PKCS1-v1_5 / SHA-256 ("SHA256withRSA"), standard
 * Base64 with padding:
 *
 *   signRequest          the nine-line request string, X-SVC-Sign with the merchant's private key
 *   verifyResponse       the five-line response string, checked with the platform's public key
 *   verifyNotification   the four-line notification string, checked likewise, plus the time window
 *
 * Build and run: javac -d classes MpsSigning.java && java -cp classes MpsSigning (prints the commands).
 * Private keys: PKCS#8 PEM ("BEGIN PRIVATE KEY", what keygen and provisioning write); convert a
 * PKCS#1 key with `openssl pkcs8 -topk8 -nocrypt -in old.pem -out merchant-private.pem`.
 */
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.X509EncodedKeySpec;
import java.time.Duration;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class MpsSigning {
  static final long NOTIFY_TOLERANCE_SECONDS = 300;
  private static final String ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  private static final SecureRandom RANDOM = new SecureRandom();

  /** A rejected answer or notification: treat it as forged. */
  static final class VerificationException extends Exception {
    VerificationException(String message) {
      super(message);
    }
  }

  static String sha256Hex(byte[] data) throws GeneralSecurityException {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
  }

  /** Media type only, lower-cased, parameters and surrounding blanks removed; "" when absent. */
  static String normalizeContentType(String value) {
    if (value == null) return "";
    int semi = value.indexOf(';');
    return (semi == -1 ? value : value.substring(0, semi)).strip().toLowerCase(Locale.ROOT);
  }

  static String sign(PrivateKey key, String text) throws GeneralSecurityException {
    Signature s = Signature.getInstance("SHA256withRSA");
    s.initSign(key);
    s.update(text.getBytes(StandardCharsets.UTF_8));
    return Base64.getEncoder().encodeToString(s.sign());
  }

  static boolean verify(PublicKey key, String text, String signatureBase64) throws GeneralSecurityException {
    byte[] signature;
    try {
      signature = Base64.getDecoder().decode(signatureBase64);
    } catch (IllegalArgumentException notBase64) {
      return false;
    }
    Signature s = Signature.getInstance("SHA256withRSA");
    s.initVerify(key);
    s.update(text.getBytes(StandardCharsets.UTF_8));
    try {
      return s.verify(signature);
    } catch (java.security.SignatureException malformed) {
      return false;
    }
  }

  static PrivateKey loadPrivateKey(String pem) throws GeneralSecurityException {
    String base64 = pem.replaceAll("-----(BEGIN|END) PRIVATE KEY-----", "").replaceAll("\\s", "");
    return KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
  }

  static PublicKey loadPublicKey(String pem) throws GeneralSecurityException {
    String base64 = pem.replaceAll("-----(BEGIN|END) PUBLIC KEY-----", "").replaceAll("\\s", "");
    return KeyFactory.getInstance("RSA").generatePublic(new X509EncodedKeySpec(Base64.getDecoder().decode(base64)));
  }

  /**
   * {keyId: public key} from platform-keys.json (GET /api/admin/v1/platform-keys:
   * {"keys":[{"keyId","publicKeyPem"}], ...}). The JDK has no JSON parser: this reads the objects
   * that carry both fields; with a JSON library, read the "keys" array instead.
   */
  static Map<String, PublicKey> loadPlatformKeys(String json) throws GeneralSecurityException {
    Map<String, PublicKey> keys = new LinkedHashMap<>();
    Matcher object = Pattern.compile("\\{[^{}]*\\}").matcher(json);
    while (object.find()) {
      String keyId = jsonString(object.group(), "keyId");
      String pem = jsonString(object.group(), "publicKeyPem");
      if (keyId != null && pem != null) keys.put(keyId, loadPublicKey(pem));
    }
    return keys;
  }

  private static String jsonString(String object, String field) {
    Matcher m = Pattern.compile("\"" + field + "\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(object);
    return m.find() ? m.group(1).replace("\\n", "\n").replace("\\/", "/").replace("\\\"", "\"").replace("\\\\", "\\") : null;
  }

  /** decisions.md section 1: nine lines, each ending in LF. target: path plus query exactly as sent. */
  static String requestSigningString(String method, String target, String appId, String keyId, String timestamp, String nonce,
      String requestId, String contentType, byte[] body) throws GeneralSecurityException {
    return String.join("\n", method.toUpperCase(Locale.ROOT), target, appId, keyId, timestamp, nonce, requestId,
        normalizeContentType(contentType), sha256Hex(body)) + "\n";
  }

  /**
   * The six X-SVC-* headers (plus Content-Type when not null) for one request; send them unchanged.
   * timestamp, nonce and requestId may be null (generated). A retry reuses requestId and the body
   * bytes, with a fresh timestamp, nonce and signature.
   */
  static Map<String, String> signRequest(PrivateKey key, String method, String target, String appId, String keyId, byte[] body,
      String contentType, String timestamp, String nonce, String requestId) throws GeneralSecurityException {
    if (timestamp == null) timestamp = Long.toString(System.currentTimeMillis() / 1000);
    if (nonce == null) nonce = randomAlphanumeric(32);
    if (requestId == null) requestId = "req_" + randomAlphanumeric(24);
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("X-SVC-App-Id", appId);
    headers.put("X-SVC-Key-Id", keyId);
    headers.put("X-SVC-Timestamp", timestamp);
    headers.put("X-SVC-Nonce", nonce);
    headers.put("X-SVC-Request-Id", requestId);
    headers.put("X-SVC-Sign", sign(key, requestSigningString(method, target, appId, keyId, timestamp, nonce, requestId, contentType, body)));
    if (contentType != null) headers.put("Content-Type", contentType);
    return headers;
  }

  /** decisions.md section 3: five lines, each ending in LF. */
  static String responseSigningString(String timestamp, String nonce, String requestId, int status, byte[] body)
      throws GeneralSecurityException {
    return timestamp + "\n" + nonce + "\n" + requestId + "\n" + status + "\n" + sha256Hex(body) + "\n";
  }

  /**
   * true for a verified answer, false for an unsigned one (the early rejections are unsigned; a
   * conforming platform signs every 2xx). Throws for anything to treat as forged: some signature
   * headers only, an unknown key id, an answer to another request, a bad signature.
   * header: a case-insensitive lookup of the answer's headers (null when absent).
   */
  static boolean verifyResponse(Map<String, PublicKey> platformKeys, int status, Function<String, String> header, byte[] body,
      String sentRequestId) throws GeneralSecurityException, VerificationException {
    String sign = header.apply("X-SVC-Response-Sign");
    String keyId = header.apply("X-SVC-Response-Key-Id");
    String timestamp = header.apply("X-SVC-Response-Timestamp");
    String nonce = header.apply("X-SVC-Response-Nonce");
    if (sign == null && keyId == null && timestamp == null && nonce == null) return false;
    if (sign == null || keyId == null || timestamp == null || nonce == null)
      throw new VerificationException("some of the response signature headers only");
    PublicKey key = platformKeys.get(keyId);
    if (key == null) throw new VerificationException("unknown platform key id " + keyId + ": refresh platform-keys.json");
    String echoed = header.apply("X-SVC-Request-Id");
    if (!sentRequestId.equals(echoed)) throw new VerificationException("the answer echoes another request id");
    if (!verify(key, responseSigningString(timestamp, nonce, echoed, status, body), sign))
      throw new VerificationException("bad response signature");
    return true;
  }

  /** decisions.md section 7: four lines, each ending in LF. */
  static String notificationSigningString(String timestamp, String nonce, String eventId, byte[] body) throws GeneralSecurityException {
    return timestamp + "\n" + nonce + "\n" + eventId + "\n" + sha256Hex(body) + "\n";
  }

  /**
   * Verifies a notification's raw body bytes, as received, before parsing them; returns its event
   * id. On an exception answer the platform non-2xx (it retries). Parse the body with your JSON
   * library afterwards, check that its eventId equals the one returned, and de-duplicate by it.
   */
  static String verifyNotification(Map<String, PublicKey> platformKeys, Function<String, String> header, byte[] rawBody,
      long nowSeconds) throws GeneralSecurityException, VerificationException {
    String eventId = header.apply("X-SVC-Event-Id");
    String timestamp = header.apply("X-SVC-Notify-Timestamp");
    String nonce = header.apply("X-SVC-Notify-Nonce");
    String keyId = header.apply("X-SVC-Notify-Key-Id");
    String sign = header.apply("X-SVC-Notify-Sign");
    if (eventId == null || timestamp == null || nonce == null || keyId == null || sign == null)
      throw new VerificationException("a notification header is missing");
    PublicKey key = platformKeys.get(keyId);
    if (key == null) throw new VerificationException("unknown platform key id " + keyId + ": refresh platform-keys.json");
    if (!timestamp.matches("[0-9]{1,10}") || !verify(key, notificationSigningString(timestamp, nonce, eventId, rawBody), sign))
      throw new VerificationException("bad notification signature");
    if (Math.abs(nowSeconds - Long.parseLong(timestamp)) > NOTIFY_TOLERANCE_SECONDS)
      throw new VerificationException("notification timestamp outside the 300 s window");
    return eventId;
  }

  static String randomAlphanumeric(int length) {
    StringBuilder out = new StringBuilder(length);
    for (int i = 0; i < length; i++) out.append(ALPHANUMERIC.charAt(RANDOM.nextInt(ALPHANUMERIC.length())));
    return out.toString();
  }

  /** One signed open-API call with the settings of merchant.env; prints the verified answer. */
  static int call(String method, String target, byte[] body) throws Exception {
    Map<String, String> env = System.getenv();
    String base = env.get("MPS_BASE_URL").replaceAll("/+$", "");
    target = URI.create(base).getRawPath() + target; // a base URL's path prefix is part of the signed target
    PrivateKey key = loadPrivateKey(Files.readString(Path.of(env.get("MPS_PRIVATE_KEY_FILE"))));
    Map<String, PublicKey> platformKeys = loadPlatformKeys(Files.readString(Path.of(env.get("MPS_PLATFORM_KEYS_FILE"))));
    boolean post = method.equals("POST");
    byte[] payload = body == null ? new byte[0] : body;
    // A GET sends neither body nor Content-Type; every POST sends application/json.
    Map<String, String> headers = signRequest(key, method, target, env.get("MPS_APP_ID"), env.get("MPS_KEY_ID"), payload,
        post ? "application/json" : null, null, null, null);
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base.replaceAll("^(https?://[^/]+).*$", "$1") + target))
        .timeout(Duration.ofSeconds(15))
        .method(method, post ? HttpRequest.BodyPublishers.ofByteArray(payload) : HttpRequest.BodyPublishers.noBody());
    headers.forEach(request::header);
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(15)).build();
    HttpResponse<byte[]> response = client.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
    boolean verified = verifyResponse(platformKeys, response.statusCode(), name -> response.headers().firstValue(name).orElse(null),
        response.body(), headers.get("X-SVC-Request-Id"));
    boolean ok = response.statusCode() >= 200 && response.statusCode() < 300;
    if (ok && !verified) throw new VerificationException("a 2xx answer without response signature");
    System.err.println("HTTP " + response.statusCode() + ", " + (verified ? "response signature verified" : "unsigned"));
    System.out.println(new String(response.body(), StandardCharsets.UTF_8));
    return ok ? 0 : 1;
  }

  private static byte[] read(String file) throws IOException {
    return file.isEmpty() ? new byte[0] : Files.readAllBytes(Path.of(file));
  }

  /** A file of "Name: value" lines, looked up case-insensitively. */
  private static Function<String, String> readHeaders(String file) throws IOException {
    Map<String, String> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    for (String line : Files.readAllLines(Path.of(file), StandardCharsets.UTF_8)) {
      int colon = line.indexOf(':');
      if (colon > 0) headers.put(line.substring(0, colon).strip(), line.substring(colon + 1).strip());
    }
    return headers::get;
  }

  private static final String USAGE = String.join("\n",
      "usage: java -cp classes MpsSigning COMMAND ...",
      "  sign-request PRIVATE_KEY_PEM METHOD TARGET APP_ID KEY_ID TIMESTAMP NONCE REQUEST_ID CONTENT_TYPE BODY_FILE",
      "      prints the signed headers ('Name: value' lines); CONTENT_TYPE '' = no header, BODY_FILE '' = no body",
      "  verify-response PLATFORM_KEYS_JSON HEADERS_FILE STATUS BODY_FILE SENT_REQUEST_ID",
      "  verify-notification PLATFORM_KEYS_JSON HEADERS_FILE BODY_FILE [NOW]",
      "      HEADERS_FILE: the received headers as 'Name: value' lines; NOW: epoch seconds (default: the clock)",
      "  call METHOD TARGET [BODY_FILE]",
      "      a signed call with the settings of merchant.env (MPS_BASE_URL, MPS_APP_ID, MPS_KEY_ID,",
      "      MPS_PRIVATE_KEY_FILE, MPS_PLATFORM_KEYS_FILE); the answer verified, its body printed",
      "exit 0: done / valid; 1: refused, invalid or a non-2xx answer; 2: wrong command line");

  public static void main(String[] argv) throws Exception {
    String command = argv.length > 0 ? argv[0] : "";
    int n = argv.length - 1;
    try {
      if (command.equals("sign-request") && n == 10) {
        String contentType = argv[9].isEmpty() ? null : argv[9];
        Map<String, String> headers = signRequest(loadPrivateKey(Files.readString(Path.of(argv[1]))), argv[2], argv[3], argv[4],
            argv[5], read(argv[10]), contentType, argv[6], argv[7], argv[8]);
        headers.forEach((name, value) -> System.out.println(name + ": " + value));
        System.exit(0);
      }
      if (command.equals("verify-response") && n == 5) {
        Map<String, PublicKey> keys = loadPlatformKeys(Files.readString(Path.of(argv[1])));
        boolean verified = verifyResponse(keys, Integer.parseInt(argv[3]), readHeaders(argv[2]), read(argv[4]), argv[5]);
        System.out.println(verified ? "verified" : "unsigned");
        System.exit(verified ? 0 : 1);
      }
      if (command.equals("verify-notification") && (n == 3 || n == 4)) {
        Map<String, PublicKey> keys = loadPlatformKeys(Files.readString(Path.of(argv[1])));
        long now = n == 4 ? Long.parseLong(argv[4]) : System.currentTimeMillis() / 1000;
        System.out.println(verifyNotification(keys, readHeaders(argv[2]), read(argv[3]), now));
        System.exit(0);
      }
      if (command.equals("call") && (n == 2 || n == 3)) {
        System.exit(call(argv[1].toUpperCase(Locale.ROOT), argv[2], n == 3 ? read(argv[3]) : null));
      }
    } catch (VerificationException e) {
      System.err.println("invalid: " + e.getMessage());
      System.exit(1);
    }
    System.err.println(USAGE);
    System.exit(2);
  }
}
